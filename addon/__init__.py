"""webarena-live's proxy side: live capture, runs, the control API, the demo and the commands.

One sub-package per concern (docs/architecture.md draws them); each one's docstring names what it
owns and what it may import, and the `[tool.importlinter]` contracts in pyproject.toml check the
arrows in CI:

- `runs`: an attempt's state, journal, HAR spool, outputs and recovery. Imports the evaluator only.
- `control`: the control API (app, models, middleware, event streams, dashboard). Imports `runs`.
- `proxy`: the mitmproxy addon and what runs per flow. Imports `control` and `runs`.
- `commands`: `serve`, `evaluate` and the CLI. Imports everything above.
- `demo`: the embedded demo shop, its scripted agent and `webarena-live demo`. Only the CLI imports it.

Everything depends on `webarena_live.evaluator`'s exported names, never the other way round.
"""
