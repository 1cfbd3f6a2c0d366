"""Verdicts, in the JSON shape of the reference's `eval_result.json`.

Status and score are derived, never set by hand: an evaluator with no failed
assertion succeeds, an error anywhere makes the task an error, and a task
succeeds only when every evaluator scored 1.
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict

from webarena_live.evaluator import __version__

REFERENCE_VERSION = "1.2.3"
"""The version of webarena-verified whose verdicts this release reproduces."""


class EvalStatus(StrEnum):
    SUCCESS = "success"
    FAILURE = "failure"
    ERROR = "error"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class Assertion(_Frozen):
    """One check that did not pass (or could not run)."""

    assertion_name: str
    status: EvalStatus
    assertion_msgs: tuple[str, ...] | None = None
    error_msg: str | None = None

    @classmethod
    def failure(cls, name: str, *messages: str) -> Assertion:
        return cls(assertion_name=name, status=EvalStatus.FAILURE, assertion_msgs=messages or None)


class EvaluatorResult(_Frozen):
    evaluator_name: str
    status: EvalStatus
    score: float
    actual: Any = None
    actual_normalized: Any = None
    expected: Any = None
    assertions: tuple[Assertion, ...] | None = None
    error_msg: str | None = None
    should_not_exist: bool | None = None

    @classmethod
    def from_assertions(
        cls, evaluator_name: str, assertions: list[Assertion], **fields: Any
    ) -> EvaluatorResult:
        if any(a.status == EvalStatus.ERROR for a in assertions):
            status, score = EvalStatus.ERROR, 0.0
        elif all(a.status == EvalStatus.SUCCESS for a in assertions):
            status, score = EvalStatus.SUCCESS, 1.0
        else:
            status, score = EvalStatus.FAILURE, 0.0
        return cls(
            evaluator_name=evaluator_name,
            status=status,
            score=score,
            assertions=tuple(assertions) or None,
            **fields,
        )

    @classmethod
    def from_error(cls, evaluator_name: str, message: str, **fields: Any) -> EvaluatorResult:
        return cls(
            evaluator_name=evaluator_name, status=EvalStatus.ERROR, score=0.0, error_msg=message, **fields
        )


class TaskResult(_Frozen):
    task_id: int
    intent_template_id: int
    sites: tuple[str, ...]
    task_revision: int
    status: EvalStatus
    score: float
    evaluators_results: tuple[EvaluatorResult, ...]
    error_msg: str | None = None
    warnings: tuple[str, ...] | None = None
    """Where the answer's shape departs from the seed's rules, the response schema or the task's
    results_schema (answer_shape.py); they never change the verdict."""
    preview: bool | None = None
    """True on a preview: the result a finish would give at that moment, with nothing finished or written."""
    interference: dict[str, Any] | None = None
    """A live finish's answer only (never `eval_result.json`): the mutations other sessions made on
    the session's replicas while it ran, `exposed` true when there were any. The verdict is the
    reference's either way."""
    lease_ended: str | None = None
    """A live finish's answer only (never `eval_result.json`): why the session's lease of its replicas
    ended before the finish (`timeout`, `abandoned`, `lost`). The verdict is the reference's on what was
    captured while the lease held; a reward is masked for it."""
    webarena_verified_version: str = REFERENCE_VERSION
    webarena_verified_data_checksum: str | None = None
    webarena_live_version: str = __version__

    @classmethod
    def from_evaluators(cls, *, evaluators_results: list[EvaluatorResult], **fields: Any) -> TaskResult:
        if any(r.status == EvalStatus.ERROR for r in evaluators_results):
            status, score = EvalStatus.ERROR, 0.0
        elif evaluators_results and all(r.score == 1.0 for r in evaluators_results):
            status, score = EvalStatus.SUCCESS, 1.0
        else:
            status, score = EvalStatus.FAILURE, 0.0
        return cls(status=status, score=score, evaluators_results=tuple(evaluators_results), **fields)

    @classmethod
    def from_error(cls, *, task_id: int, message: str, **fields: Any) -> TaskResult:
        """A task that could not be evaluated at all (unknown task, unreadable input)."""
        defaults: dict[str, Any] = {"intent_template_id": -1, "sites": (), "task_revision": -1}
        return cls(
            task_id=task_id,
            status=EvalStatus.ERROR,
            score=0.0,
            evaluators_results=(),
            error_msg=message,
            **{**defaults, **fields},
        )

    def to_dict(self) -> dict[str, Any]:
        """The result as the finish answers it (fields that are None are left out, as the reference
        does); `eval_result.json` is the same without `interference` and `lease_ended` (`to_file_dict`)."""
        return self.model_dump(mode="json", exclude_none=True)

    def to_file_dict(self) -> dict[str, Any]:
        """The `eval_result.json` document: the interference and the lease's end are in `attempt.json`."""
        return self.model_dump(mode="json", exclude_none=True, exclude={"interference", "lease_ended"})

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False)
