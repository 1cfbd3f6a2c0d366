"""What the control API works on: the control context (`ControlContext`, the routes' `Control`
dependency), how a session's ends free what it holds (`SessionEnds`), and the session a route names.

The routes (`control/*_routes.py`) are thin: they read a request into a model, call the work behind them
(here, `control/starts.py`, `control/start_plan.py`, `control/views.py`, and the context's lease
authority, `control/authority.py`), and answer with the JSON view. A failing request raises a
`ControlError` (a JSON 4xx) and changes nothing: every check runs before the first change. A lease's
life is told once, in docs/architecture.md (Leases).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Annotated, Any, Protocol
from urllib.parse import unquote

from fastapi import Depends, Request

from webarena_live.control.authority import Authority, ToldLeases
from webarena_live.control.bodies import ControlError
from webarena_live.evaluator import (
    SiteMap,
    TaskSet,
)
from webarena_live.replicas import Lease, LeaseUse, MutationLog
from webarena_live.replicas.lease import FORGOTTEN, EndReason
from webarena_live.runs.sessions import (
    FINISHED,
    NoticeKind,
    Session,
    SessionStore,
)
from webarena_live.runs.settings import RunSettings

RESERVED_HOST = "webarena-live.invalid"
"""Requests through the proxy to this host are control requests, never forwarded."""

logger = logging.getLogger(__name__)


class AddressGiver(Protocol):
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
    lease, so a finish frees both in one way whichever route or caller finished it; and told by the pool
    when a lease ends before its finish (`lease_ended`).

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
        ctx.authority.end(session.name, EndReason.FINISHED)

    def lease_ended(self, lease: Lease) -> None:
        """A lease of a session here ended before its finish (`ReplicaPool.end_lease`, or the end a
        fleet's front told): said in the log and in the session's notices."""
        if lease.ended is None or lease.ended in FORGOTTEN:
            return
        logger.warning(
            "webarena-live: session %s's lease ended (%s%s): replicas given back, its requests refused",
            lease.session, lease.ended, f": {lease.ended_detail}" if lease.ended_detail else "",
        )  # fmt: skip
        session = self.ctx.sessions.get(lease.session)
        if session is not None and session.attempt.lease is lease:
            self.ctx.sessions.notices.publish(
                session, NoticeKind.POOL, {"kind": "release", "reason": lease.ended}
            )


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
        addresses: AddressGiver | None = None,
        authority: Authority | None = None,
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
        self.authority = authority if authority is not None else ToldLeases()
        """Who decides the sessions' leases (`control/authority.py`): this process's pool, or the views
        a fleet's front told this worker (nothing told: no leases)."""
        self.lease_use = LeaseUse()
        """The leases used here, the latest last: `GET /mutations` tells a front the uses since it asked."""
        self.ends = SessionEnds.attach(self)
        self.authority.attach(self)  # its ends (idle ones too) and its notices reach these sessions

    @property
    def mutations(self) -> MutationLog | None:
        """The mutations of the traffic this process sees (`GET /mutations`): the authority's log."""
        return self.authority.log

    @property
    def settings(self) -> RunSettings:
        return self.sessions.settings

    @property
    def site_map(self) -> SiteMap:
        return self.sessions.settings.site_map

    @property
    def output_dir(self) -> Path | None:
        return self.sessions.settings.output_dir


def find_session(ctx: ControlContext, name: str) -> Session:
    """The session named `name`; `ControlError` 404 when there is none."""
    session = ctx.sessions.get(name)
    if session is None:
        raise ControlError(404, "unknown_session", f"no session named {name!r}")
    return session


def note_use(ctx: ControlContext, session: Session) -> None:
    """A control call naming `session` uses its lease, as its traffic does (`--lease-timeout` counts
    idle time from the last use: `LeaseUse`)."""
    lease = session.attempt.lease
    if lease is not None and lease.ended is None:
        ctx.lease_use.used(session.name, lease)


def session_in_path(ctx: ControlContext, session: str) -> Session:
    """The session a route's path names (percent-decoded: the raw path keeps `%2F` and the like); the
    call is a use of its lease (`note_use`)."""
    found = find_session(ctx, unquote(session))
    note_use(ctx, found)
    return found


async def _control(request: Request) -> ControlContext:
    return request.app.state.control


Control = Annotated[ControlContext, Depends(_control)]
"""What every route works on, as a FastAPI dependency (the app's `state.control`)."""
