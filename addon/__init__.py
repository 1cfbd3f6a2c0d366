"""webarena-live: evaluate web agents live, with WebArena-Verified's verdicts.

This folder is the installed package `webarena_live`, by one rule: `webarena_live.X` is `addon/X`,
except `webarena_live.evaluator`, which is `evaluator/` (docs/architecture.md, Layout). The public API
is the evaluator's (`webarena_live.evaluator.__all__`, listed in its `__init__.pyi`), re-exported here
and loaded on first use, so `import webarena_live` stays cheap and pulls in neither mitmproxy nor the
value parsers.

One sub-package per concern; each one's docstring names what it owns and what it may import, and the
`[tool.importlinter]` contracts in pyproject.toml check the arrows in CI:

- `addresses`: who a connection belongs to and where a session listens (proxy credentials, ports,
  placement on workers). Imports the evaluator only.
- `runs`: an attempt's state, journal, HAR spool, outputs and recovery. Imports the evaluator.
- `sites`: the sites' copies as containers, made and made new through a container engine. Imports
  `replicas` and the evaluator.
- `control`: the control API (app, models, middleware, event streams, dashboard). Imports `runs`.
- `proxy`: the mitmproxy addon and what runs per flow. Imports `control`, `runs`, `addresses`.
- `fleet`: many proxy workers behind one control port, local processes or Ray actors. Imports
  `control`, `runs`, `addresses`, `launch`; never mitmproxy.
- `commands`: the CLI; it parses arguments and hands them to the part that does the work.
- `demo`: the embedded demo shop, its scripted agent and `webarena-live demo`. Only the CLI imports it.
- `browsergym`: BrowserGym's environment over a session (the `[browsergym]` extra). Imports the client.
- `client` (the control API from Python; its requests and answers in `client_calls`), `launch` (a
  `serve` child process), `ray` (the fleet from a Ray driver), `entry` (the script plain mitmproxy
  loads): the public modules beside them.

Everything depends on `webarena_live.evaluator`'s exported names, never the other way round.
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
