"""webarena-live's evaluator: WebArena-Verified verdicts from a task, a trace and a response.

Pure Python; never imports mitmproxy. The public API is re-exported here and
loaded on first use, so importing one submodule (or `__version__`, which
`evaluator.results` needs while it is itself being imported) does not pull in
the whole library.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# Public name -> module that defines it.
_EXPORTS = {
    "AgentResponseError": "evaluator.errors",
    "EvalStatus": "evaluator.results",
    "NetworkEvent": "evaluator.trace",
    "NetworkTrace": "evaluator.trace",
    "NormalizationError": "evaluator.errors",
    "SiteConfigError": "evaluator.errors",
    "SiteMap": "evaluator.sites",
    "Task": "evaluator.tasks",
    "TaskFileError": "evaluator.errors",
    "TaskResult": "evaluator.results",
    "TaskSet": "evaluator.tasks",
    "TraceFormatError": "evaluator.errors",
    "UnknownTaskError": "evaluator.errors",
    "WebArenaLiveError": "evaluator.errors",
    "evaluate_directory": "evaluator.batch",
    "evaluate_task": "evaluator.evaluate",
    "load_tasks": "evaluator.tasks",
    "load_trace": "evaluator.har",
    "parse_response": "evaluator.responses",
    "trace_to_har": "evaluator.har",
}

__all__ = [
    "AgentResponseError",
    "EvalStatus",
    "NetworkEvent",
    "NetworkTrace",
    "NormalizationError",
    "SiteConfigError",
    "SiteMap",
    "Task",
    "TaskFileError",
    "TaskResult",
    "TaskSet",
    "TraceFormatError",
    "UnknownTaskError",
    "WebArenaLiveError",
    "__version__",
    "evaluate_directory",
    "evaluate_task",
    "load_tasks",
    "load_trace",
    "parse_response",
    "trace_to_har",
]

if TYPE_CHECKING:
    from evaluator.batch import evaluate_directory
    from evaluator.errors import (
        AgentResponseError,
        NormalizationError,
        SiteConfigError,
        TaskFileError,
        TraceFormatError,
        UnknownTaskError,
        WebArenaLiveError,
    )
    from evaluator.evaluate import evaluate_task
    from evaluator.har import load_trace, trace_to_har
    from evaluator.responses import parse_response
    from evaluator.results import EvalStatus, TaskResult
    from evaluator.sites import SiteMap
    from evaluator.tasks import Task, TaskSet, load_tasks
    from evaluator.trace import NetworkEvent, NetworkTrace


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'evaluator' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
