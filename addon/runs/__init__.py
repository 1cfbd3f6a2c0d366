"""Runs: one agent's attempt at one task, from its first event to its written outputs.

Owns a session's name and current attempt (`sessions`), the attempt's trace, journal, HAR spool,
evaluation warm-up and finish (`attempt`), the journal file format (`journal`), the spool of a
running `network.har` (`har_spool`), the finish's files (`outputs`), what a restart finds in the
journals (`recovery`) and redaction (`redact`).

May import: the standard library and `webarena_live.evaluator`'s exported names. Never mitmproxy,
FastAPI/Starlette or any other part of `addon`: a run is judged and written the same whether the
proxy, the control API or a test drives it.
"""
