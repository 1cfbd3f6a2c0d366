"""webarena-live's mitmproxy side: live capture, sessions, the control API and the CLI.

Everything that imports mitmproxy lives here; it depends on `evaluator`, never
the other way round.
"""
