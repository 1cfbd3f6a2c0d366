"""The pool's own errors: what a lease or a reset could not do. The control API turns them into its JSON
replies (`control/errors.py`: `as_control_error`); the pool knows nothing of HTTP servers."""

from __future__ import annotations

from typing import Any

from webarena_live.evaluator import WebArenaLiveError

RETRY_AFTER = 5
"""What a refusal for want of a replica tells the caller to wait before asking again (seconds)."""


class PoolError(WebArenaLiveError):
    """Something the replica pool refused; `code` names it (the control API's `error`)."""

    code = "pool_error"

    def __init__(self, detail: Any) -> None:
        super().__init__(str(detail))
        self.detail = detail


class PoolSetupError(PoolError):
    """The pool cannot be built as asked (a replica without a reset endpoint under `readers`, ...):
    one problem a line."""

    code = "pool_setup"


class NoReplica(PoolError):
    """No replica fits the task within the wait; `retry_after` seconds is a fair pause before asking again."""

    code = "no_replica"

    def __init__(self, detail: str, retry_after: int = RETRY_AFTER) -> None:
        super().__init__(detail)
        self.retry_after = retry_after


class ResetFailed(PoolError):
    """A reset of the session's replicas failed; `detail` holds each outcome (`ResetOutcome.view`).
    The lease is given back before this is raised."""

    code = "reset_failed"
