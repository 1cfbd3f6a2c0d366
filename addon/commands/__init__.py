"""The commands: `webarena-live serve`, `evaluate`, `report`, `verify`, `export`, `demo`, `addon-path`.

Owns the command line (`cli`), the `serve` host process and its process-wide memory policy
(`serve`, `process_memory`, `ports`), the reading of `serve --workers` into a fleet plan
(`serve_workers`; the fleet runs it), the offline evaluation of run directories (`evaluate`) and the
run report (`report`, `report_html`), and Harbor's `verify` and `export harbor` (`rewards`, over
`webarena_live.rewards`).

May import: every other part of `webarena_live` (it is the top of the dependency graph); nothing
imports it but the console script.
"""
