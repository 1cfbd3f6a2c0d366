"""webarena-live: evaluate web agents live, with WebArena-Verified's verdicts.

This is the top of the installed package (pyproject.toml maps `package/` here,
`addon/` to `webarena_live.addon`, `evaluator/` to `webarena_live.evaluator`).
The public API is the evaluator's (`webarena_live.evaluator.__all__`, listed in
its `__init__.pyi`), re-exported here and loaded on first use, so
`import webarena_live` stays cheap and pulls in neither mitmproxy nor the value
parsers.
"""

from typing import Any

from webarena_live import evaluator as _evaluator
from webarena_live.evaluator import __version__ as __version__

__all__ = _evaluator.__all__


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'webarena_live' has no attribute {name!r}")
    value = getattr(_evaluator, name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
