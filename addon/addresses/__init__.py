"""Addresses: who a connection belongs to and where a session listens.

Owns the proxy credentials that name a session and the control token's environment variable
(`credentials`), and the placement of sessions on workers and their own proxy ports (`placement`):
plain bookkeeping below both the proxy (one process) and the fleet (many), which both use it.

May import: the evaluator's exported names. Never mitmproxy, a web framework, Ray or another part
of `webarena_live`.
"""
