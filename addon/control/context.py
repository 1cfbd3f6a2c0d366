"""What the control API works on, and the work behind its routes that is not HTTP.

The routes (`control/app.py`, `control/agent_routes.py`) are thin: they read a request into a model, call
one of these, and answer with the JSON view. A failing request raises a
`ControlError` (a JSON 4xx) and changes nothing: every check runs before the
first change.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Protocol
from urllib.parse import unquote

from fastapi import Depends, Request

from webarena_live.control.bodies import ControlError
from webarena_live.control.models import StartSession
from webarena_live.evaluator import (
    ANSWER_STATUSES,
    ANSWER_TASK_TYPES,
    REFERENCE_VERSION,
    NetworkTrace,
    SiteMap,
    Task,
    TaskSet,
    UnknownTaskError,
    WebArenaLiveError,
    __version__,
    run_name_problem,
)
from webarena_live.replicas import Lease, LeaseUse, MutationLog
from webarena_live.replicas.pool import ReplicaPool
from webarena_live.runs.recovery import (
    JournalNotFoundError,
    find_journal,
    journal_started,
    read_journal,
    resumable_runs,
)
from webarena_live.runs.sessions import (
    DEFAULT_SESSION,
    FINISHED,
    Session,
    SessionState,
    SessionStore,
    session_name_problem,
)
from webarena_live.runs.settings import RunSettings

RESERVED_HOST = "webarena-live.invalid"
"""Requests through the proxy to this host are control requests, never forwarded."""

logger = logging.getLogger(__name__)


class SessionAddresses(Protocol):
    """The sessions' own proxy addresses (`proxy/session_addresses.py`); the control API only asks."""

    async def claim(
        self, session: str, port: int | None = None, *, client: str | None = None, near: str | None = None
    ) -> str | None:
        """The session's `http://HOST:PORT`, opened unless it holds one; `ControlError` 503 if none
        can be; None when the host cannot listen for sessions. Beyond loopback only `client` (the
        address that asked), `near` and holders of the session's secret may use it."""
        ...

    def secret_of(self, session: str) -> str | None:
        """The session's secret when its address is guarded (beyond loopback), else None."""
        ...

    def release(self, session: str) -> None:
        """Close the session's address (a finish: `SessionEnds`); nothing when it holds none."""
        ...

    async def settle(self) -> None:
        """Wait until the ports released so far are closed."""
        ...


class SessionEnds:
    """Subscribed to the sessions' notices: a `finished` notice frees the session's address and its
    lease, so a finish frees both in one way whichever route or caller finished it.

    One per session store (`attach`): the control context is rebuilt when the proxy is reconfigured, and
    the ends of the current one (its pool, its addresses) take the place of the last one's."""

    def __init__(self, ctx: ControlContext) -> None:
        self.ctx = ctx

    @classmethod
    def attach(cls, ctx: ControlContext) -> SessionEnds:
        """The ends of `ctx`'s sessions, in place of those of the context it replaces (one per store)."""
        ends = cls(ctx)
        ctx.sessions.notices.subscribe(ends.on_notice, role="ends")
        return ends

    def on_notice(self, session: Session, kind: str, payload: dict[str, Any] | None) -> None:
        if kind != FINISHED:
            return
        ctx = self.ctx
        if ctx.addresses is not None:
            ctx.addresses.release(session.name)
        session.proxy = None
        if ctx.pool is not None:
            ctx.pool.release(session.name, "finished")


class ControlContext:
    """What the routes work on: the loaded tasks, the sessions (with the settings their attempts read)
    and the control API's own settings."""

    def __init__(
        self,
        *,
        tasks: TaskSet,
        sessions: SessionStore,
        token: str | None = None,
        extra_health: dict[str, Any] | None = None,
        finish_guard: Callable[[], AbstractContextManager[object]] = nullcontext,
        addresses: SessionAddresses | None = None,
        pool: ReplicaPool | None = None,
        mutations: MutationLog | None = None,
    ) -> None:
        self.tasks = tasks
        self.sessions = sessions
        self.token = token
        """When set, every route but /health and /openapi.json needs `Authorization: Bearer <token>`."""
        self.extra_health = extra_health if extra_health is not None else {}
        self.finish_guard = finish_guard
        """Wraps every finish; `webarena-live serve` keeps garbage collections out of it (`gc_paused`)."""
        self.addresses = addresses
        """Gives each started session a proxy port of its own; None: sessions get no address (a test
        app without a proxy)."""
        self.refused_page_requests = 0
        """Control requests refused because a web page sent them (shown by /health)."""
        self.pool = pool
        """The site map's replicas (`replicas/pool.py`) when this process leases them; None on a fleet's
        worker (its front leases) and without a site map."""
        self.mutations = mutations if mutations is not None or pool is None else pool.log
        """The mutations of the traffic this process sees (`GET /mutations`): the pool's own log, or a
        worker's (`control/leasing.py`)."""
        self.lease_use = LeaseUse()
        """The leases used here, the latest last: `GET /mutations` tells a front the uses since it asked."""
        SessionEnds.attach(self)

    @property
    def settings(self) -> RunSettings:
        return self.sessions.settings

    @property
    def site_map(self) -> SiteMap:
        return self.sessions.settings.site_map

    @property
    def output_dir(self) -> Path | None:
        return self.sessions.settings.output_dir


def render_url(site_map: SiteMap, template: str, sites: tuple[str, ...]) -> str:
    """A start URL with real base URLs; placeholders the site map cannot fill stay as they are."""
    try:
        return site_map.render(template, sites=sites, strict=False)
    except WebArenaLiveError:
        return template


def task_view(task: Task, site_map: SiteMap) -> dict[str, Any]:
    """What an agent may see of a task: never the evaluators (they hold the expected answer), but the
    shape its final answer must have: `results_schema` and the `task_type` and `status` values the
    answer may give."""
    return {
        "task_id": task.task_id,
        "intent_template_id": task.intent_template_id,
        "sites": list(task.sites),
        "intent": task.intent,
        "start_urls": [render_url(site_map, url, task.sites) for url in task.start_urls],
        "revision": task.revision,
        "results_schema": task.response_config.results_schema,
        "answer": {"task_type": list(ANSWER_TASK_TYPES), "status": list(ANSWER_STATUSES)},
    }


def find_session(ctx: ControlContext, name: str) -> Session:
    session = ctx.sessions.get(name)
    if session is None:
        raise ControlError(404, "unknown_session", f"no session named {name!r}")
    if session.attempt.lease is not None and session.attempt.lease.ended is None:
        ctx.lease_use.used(session.name, session.attempt.lease)  # a control call is use too (--lease-timeout)
    return session


def session_in_path(ctx: ControlContext, session: str) -> Session:
    """The session a route's path names (percent-decoded: the raw path keeps `%2F` and the like)."""
    return find_session(ctx, unquote(session))


async def _control(request: Request) -> ControlContext:
    return request.app.state.control


Control = Annotated[ControlContext, Depends(_control)]
"""What every route works on, as a FastAPI dependency (the app's `state.control`)."""


def find_task(ctx: ControlContext, task_id: int) -> Task:
    try:
        return ctx.tasks[task_id]
    except UnknownTaskError as error:
        raise ControlError(404, "unknown_task", str(error)) from None


def health(ctx: ControlContext) -> dict[str, Any]:
    return {
        "status": "ok",
        "version": __version__,
        "reference_version": REFERENCE_VERSION,
        "tasks": len(ctx.tasks),
        "tasks_source": ctx.tasks.source,
        "sessions": len(ctx.sessions),
        "output_dir": str(ctx.output_dir) if ctx.output_dir else None,
        "journal_dir": str(ctx.settings.journal_dir) if ctx.settings.journal_dir else None,
        "refused_page_requests": ctx.refused_page_requests,
        "control_token": bool(ctx.token),
        "redact": ctx.settings.redact,
        "sites": {name: list(urls) for name, urls in ctx.site_map.urls.items()},
        **({"pool": ctx.pool.status()} if ctx.pool is not None else {}),
        **ctx.extra_health,
    }


def list_sessions(ctx: ControlContext) -> list[dict[str, Any]]:
    """The live sessions, then unfinished runs found in the journals (resumable after a restart)."""
    live = [session.describe() for session in ctx.sessions]
    own = {session.attempt.journal.path for session in ctx.sessions if session.attempt.journal is not None}
    return live + resumable_runs(ctx.settings.journal_dir, skip=own)


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
    if request.resume_journal:
        try:  # read before the restart clears the session: a failure changes nothing
            journal = find_journal(ctx.settings.journal_dir, name, task.task_id)
            resumed, started = read_journal(journal), journal_started(journal)
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
    return StartPlan(name=name, task=task, run=request.run, resumed=resumed, started=started, journal=journal)


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
        session.resume(list(plan.resumed))
    site_map = ctx.site_map.on_replicas(lease.indexes) if lease is not None else ctx.site_map
    view = task_view(plan.task, site_map)
    reply = {"session": session.name, "state": session.state.value, **{k: view[k] for k in _START_FIELDS}}
    if lease is not None:
        reply["replicas"] = lease.replicas
    if plan.resumed is not None:
        reply["resumed_events"] = len(plan.resumed)
    return reply
