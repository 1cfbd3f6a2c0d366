"""webarena-live: evaluate web agents live, with WebArena-Verified's verdicts.

The repository root is this import package: the build installs it as
`webarena_live`, with `addon/` as `webarena_live.addon` and `evaluator/` as
`webarena_live.evaluator` (pyproject.toml). The evaluator's public API is
re-exported here and loaded on first use, so `import webarena_live` stays
cheap and pulls in neither mitmproxy nor the value parsers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from webarena_live import evaluator as _evaluator
from webarena_live.evaluator import __version__

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
    from webarena_live.evaluator import (
        AgentResponseError,
        EvalStatus,
        EventRecord,
        FinalAnswer,
        NetworkEvent,
        NetworkTrace,
        NormalizationError,
        SiteConfigError,
        SiteMap,
        Task,
        TaskFileError,
        TaskProgress,
        TaskResult,
        TaskSet,
        TraceFormatError,
        UnknownTaskError,
        WebArenaLiveError,
        evaluate_directory,
        evaluate_task,
        event_to_har_entry,
        event_to_har_json,
        load_tasks,
        load_trace,
        parse_response,
        prepare_evaluation,
        prepare_output_dir,
        run_name_problem,
        task_progress,
        trace_to_har,
    )


def __getattr__(name: str) -> Any:
    if name not in _evaluator.__all__:
        raise AttributeError(f"module 'webarena_live' has no attribute {name!r}")
    value = getattr(_evaluator, name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
