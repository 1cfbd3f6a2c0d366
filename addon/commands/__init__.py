"""The commands: `webarena-live serve`, `evaluate`, `addon-path` and the CLI that dispatches them.

Owns the command line (`cli`), the `serve` host process and its process-wide memory policy
(`serve`, `process_memory`) and the offline evaluation of run directories (`evaluate`).

May import: every other part of `webarena_live` (it is the top of the dependency graph); nothing
imports it but the console script.
"""
