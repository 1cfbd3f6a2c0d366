"""The replica pool: which copy of each site a session works on, and what changes a copy.

Owns: `changes`, the judgement of each request as a read or a change of its site (docs/architecture.md,
Replicas).
May import: the evaluator's public names and graphql-core (`changes` nothing else: an import contract).
"""
