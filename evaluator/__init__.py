"""webarena-live's evaluator: WebArena-Verified verdicts from a task, a trace and a response.

Pure Python; never imports mitmproxy. The public API is re-exported here.
"""

__version__ = "0.1.0"
