"""What a finish answers: its outcome, or why it was refused or could not write (`runs/attempt.py`)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from webarena_live.evaluator import TaskResult, WebArenaLiveError


def no_task_detail(session: str) -> str:
    """Why a session without a task (idle traffic only) cannot be finished, previewed or judged."""
    return f"session {session!r} has no task; POST /sessions with a task_id first"


class FinishRefused(WebArenaLiveError):
    """The attempt cannot be finished now; `reason` is a stable code (`already_finished`, `no_events`,
    `different_answer`); `detail` is text, or for `different_answer` the two answers."""

    def __init__(self, reason: str, detail: Any) -> None:
        super().__init__(detail if isinstance(detail, str) else json.dumps(detail))
        self.reason = reason
        self.detail_body = detail
        """What the refusal's `detail` says (text, or an object)."""
        self.detail = str(self)


class OutputsFailed(WebArenaLiveError):
    """The outputs could not be written (disk full, permissions); the attempt is still running."""


@dataclass(frozen=True, slots=True)
class FinishOutcome:
    result: TaskResult
    outputs: dict[str, str] | None
    """Paths of the written files by name (None without an output directory)."""
    earlier_attempt: str | None
    """Where an earlier attempt's files were moved, when there was one."""
    timings: dict[str, float]
    """Seconds spent: `evaluate`, and `total` (evaluation plus outputs)."""
    sites: dict[str, Any] = field(default_factory=dict)
    """Whether the task's sites answered every judged request (`sites_answered`, `unanswered`): sent
    beside the verdict so a reward short of success needs no second call (never part of the verdict)."""
    repeated: bool = False
    """The finish of an attempt already finished with the same answer: its first outcome, nothing
    judged or written again."""
