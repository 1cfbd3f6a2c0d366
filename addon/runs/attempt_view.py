"""An attempt as its session's view shows it (`GET /sessions/{name}`, the dashboard, the event streams):
what `Attempt.describe` answers, read off the attempt without changing it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from webarena_live.runs.settings import SessionState

if TYPE_CHECKING:
    from webarena_live.runs.attempt import Attempt


def attempt_view(attempt: Attempt) -> dict[str, Any]:
    """The attempt's state, task, counts and times, and each of what it has only when it has it (late
    events, browser requests, faults, its lease, its result, its files)."""
    task = attempt.task
    view: dict[str, Any] = {
        "state": attempt.state.value,
        "task_id": task.task_id if task else None,
        "intent": task.intent if task else None,
        "sites": list(task.sites) if task else None,
        "run": attempt.run,
        "counts": attempt.trace.counts(),
        "started": attempt.started,
        "finished": attempt.finished,
        "journal": str(attempt.journal.path) if attempt.journal and attempt.journal.lines else None,
    }
    if attempt.late_events:
        view["late_events"] = attempt.late_events
    if not len(attempt.trace) and attempt.state is SessionState.RUNNING and attempt.task is not None:
        view["nothing_captured"] = attempt.nothing_captured()  # a finish's `no_events`, said before it
    if attempt.browser_requests:
        view["browser_requests"] = {
            "count": attempt.browser_requests,
            "recent": list(attempt.recent_browser_requests),
        }
    if attempt.dropped_idle_events:
        view["dropped_idle_events"] = attempt.dropped_idle_events
    if attempt.faults_injected:
        view["faults_injected"] = list(attempt.faults_injected)
    if attempt.lease is not None:
        view.update(attempt.lease.view())
    if attempt.result is not None:
        view["result"] = {"status": attempt.result.status.value, "score": attempt.result.score}
        if attempt.result.interference is not None:
            view["interference"] = attempt.result.interference
        if attempt.outcome is not None:
            view.update(attempt.outcome.sites)
    if attempt.outputs:
        view["outputs"] = attempt.outputs
    return view
