"""A start planned before anything changes (`plan_start`: every check of `POST /sessions`), then begun
on its lease (`begin_session`); `control/starts.py` runs the steps between."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from webarena_live.control.bodies import ControlError
from webarena_live.control.context import ControlContext
from webarena_live.control.models import StartSession
from webarena_live.control.views import find_task, task_view
from webarena_live.evaluator import NetworkTrace, Task, WebArenaLiveError, run_name_problem
from webarena_live.replicas import Lease
from webarena_live.runs.fault_log import FaultLine, read_fault_log
from webarena_live.runs.recovery import JournalNotFoundError, find_journal, journal_started, read_journal
from webarena_live.runs.sessions import DEFAULT_SESSION, SessionState, session_name_problem

logger = logging.getLogger(__name__)


_START_FIELDS = ("task_id", "intent", "start_urls", "sites")


@dataclass(frozen=True)
class StartPlan:
    """A checked `POST /sessions`: which session starts which task, with which journal's events."""

    name: str
    task: Task
    run: str | None
    resumed: NetworkTrace | None
    journal: Path | None = None
    """The journal a resumed session's events come from (its lease is kept beside it)."""
    started: datetime | None = None
    """When the resumed run began (its journal's time), for a session resumed from its journal."""
    resumed_faults: tuple[FaultLine, ...] = ()
    """The faults made on purpose in the resumed run (`runs/fault_log.py`)."""


def plan_start(ctx: ControlContext, request: StartSession, *, caller: str | None) -> StartPlan:
    """Everything `POST /sessions` checks before anything changes; raises `ControlError`."""
    # An explicit empty name is an error, not a request for the caller's (or the default) session.
    name = request.session if request.session is not None else (caller or DEFAULT_SESSION)
    problem = session_name_problem(name)
    if problem:
        raise ControlError(400, "bad_session_name", problem)
    if request.run is not None and (problem := run_name_problem(request.run)):
        raise ControlError(400, "bad_run_name", problem)
    task = find_task(ctx, request.task_id)
    resumed = started = journal = None
    faults: tuple[FaultLine, ...] = ()
    if request.resume_journal:
        try:  # read before the restart clears the session: a failure changes nothing
            journal = find_journal(ctx.settings.journal_dir, name, task.task_id)
            resumed, started = read_journal(journal), journal_started(journal)
            faults = tuple(read_fault_log(journal))
        except JournalNotFoundError as error:
            raise ControlError(404, "no_journal", str(error)) from None
        except WebArenaLiveError as error:
            raise ControlError(409, "bad_journal", str(error)) from None
    current = ctx.sessions.get(name)
    busy = current is not None and current.state is SessionState.RUNNING and len(current.trace) > 0
    if current is not None and busy and not request.restart:
        running = current.task.task_id if current.task else None
        message = (
            f"session {name!r} is running task {running} and has {len(current.trace)} events; finish it, "
            'start another session name, or send "restart": true to discard its events'
        )
        raise ControlError(409, "session_running", message)
    return StartPlan(
        name=name, task=task, run=request.run, resumed=resumed, started=started, journal=journal,
        resumed_faults=faults,
    )  # fmt: skip


def begin_session(ctx: ControlContext, plan: StartPlan, lease: Lease | None = None) -> dict[str, Any]:
    """Start the planned session (restarting it if it ran) on its replicas (`lease`) and answer what the
    agent needs: its start URLs rendered on them."""
    session = ctx.sessions.start(plan.name, plan.task, run=plan.run, started=plan.started, lease=lease)
    run = f" (run {plan.run})" if plan.run else ""
    if plan.resumed is None:
        logger.info("session %s started: task %d%s: %s", plan.name, plan.task.task_id, run, plan.task.intent)
    else:  # the run goes on: its original start, and what came back from its journal
        since = f"started {plan.started:%Y-%m-%d %H:%M:%S} UTC, " if plan.started is not None else ""
        logger.info("session %s resumed: task %d%s, %s%d events from its journal: %s", plan.name,
                    plan.task.task_id, run, since, len(plan.resumed), plan.task.intent)  # fmt: skip
    if plan.resumed is not None:  # journaled again at once, so the new run's journal is complete
        session.resume(list(plan.resumed), list(plan.resumed_faults))
    site_map = ctx.site_map.on_replicas(lease.indexes) if lease is not None else ctx.site_map
    view = task_view(plan.task, site_map)
    reply = {"session": session.name, "state": session.state.value, **{k: view[k] for k in _START_FIELDS}}
    if lease is not None:
        reply["replicas"] = lease.replicas
    if plan.resumed is not None:
        reply["resumed_events"] = len(plan.resumed)
    return reply
