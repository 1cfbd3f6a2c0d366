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
    "AgentResponseError": "webarena_live.evaluator.errors",
    "EvalStatus": "webarena_live.evaluator.results",
    "EventRecord": "webarena_live.evaluator.trace",
    "FinalAnswer": "webarena_live.evaluator.responses",
    "NetworkEvent": "webarena_live.evaluator.trace",
    "NetworkTrace": "webarena_live.evaluator.trace",
    "NormalizationError": "webarena_live.evaluator.errors",
    "SiteConfigError": "webarena_live.evaluator.errors",
    "SiteMap": "webarena_live.evaluator.sites",
    "Task": "webarena_live.evaluator.tasks",
    "TaskFileError": "webarena_live.evaluator.errors",
    "TaskResult": "webarena_live.evaluator.results",
    "TaskSet": "webarena_live.evaluator.tasks",
    "TraceFormatError": "webarena_live.evaluator.errors",
    "UnknownTaskError": "webarena_live.evaluator.errors",
    "WebArenaLiveError": "webarena_live.evaluator.errors",
    "evaluate_directory": "webarena_live.evaluator.batch",
    "evaluate_task": "webarena_live.evaluator.evaluate",
    "event_to_har_entry": "webarena_live.evaluator.har",
    "event_to_har_json": "webarena_live.evaluator.har",
    "load_tasks": "webarena_live.evaluator.tasks",
    "load_trace": "webarena_live.evaluator.har",
    "parse_response": "webarena_live.evaluator.responses",
    "prepare_evaluation": "webarena_live.evaluator.evaluate",
    "task_progress": "webarena_live.evaluator.progress",
    "TaskProgress": "webarena_live.evaluator.progress",
    "prepare_output_dir": "webarena_live.evaluator.run_dir",
    "run_name_problem": "webarena_live.evaluator.run_dir",
    "trace_to_har": "webarena_live.evaluator.har",
}

__all__ = [
    "AgentResponseError",
    "EvalStatus",
    "EventRecord",
    "FinalAnswer",
    "NetworkEvent",
    "NetworkTrace",
    "NormalizationError",
    "SiteConfigError",
    "SiteMap",
    "Task",
    "TaskFileError",
    "TaskProgress",
    "TaskResult",
    "TaskSet",
    "TraceFormatError",
    "UnknownTaskError",
    "WebArenaLiveError",
    "__version__",
    "evaluate_directory",
    "evaluate_task",
    "event_to_har_entry",
    "event_to_har_json",
    "load_tasks",
    "load_trace",
    "parse_response",
    "prepare_evaluation",
    "prepare_output_dir",
    "run_name_problem",
    "task_progress",
    "trace_to_har",
]

if TYPE_CHECKING:
    from webarena_live.evaluator.batch import evaluate_directory
    from webarena_live.evaluator.errors import (
        AgentResponseError,
        NormalizationError,
        SiteConfigError,
        TaskFileError,
        TraceFormatError,
        UnknownTaskError,
        WebArenaLiveError,
    )
    from webarena_live.evaluator.evaluate import evaluate_task, prepare_evaluation
    from webarena_live.evaluator.har import event_to_har_entry, event_to_har_json, load_trace, trace_to_har
    from webarena_live.evaluator.progress import TaskProgress, task_progress
    from webarena_live.evaluator.responses import FinalAnswer, parse_response
    from webarena_live.evaluator.results import EvalStatus, TaskResult
    from webarena_live.evaluator.run_dir import prepare_output_dir, run_name_problem
    from webarena_live.evaluator.sites import SiteMap
    from webarena_live.evaluator.tasks import Task, TaskSet, load_tasks
    from webarena_live.evaluator.trace import EventRecord, NetworkEvent, NetworkTrace


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'evaluator' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
