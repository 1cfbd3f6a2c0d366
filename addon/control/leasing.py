"""The replica work behind the session routes: a lease at the start, the interference at the finish,
the release after it (docs/architecture.md, Replicas). A thin adapter of the pool (`replicas/`): its
refusals become JSON errors here (`as_control_error`).

In one process the pool is the control API's own (`ControlContext.pool`). Under `serve --workers` the
front holds the pool and a worker has none, only its mutation log (`ControlContext.mutations`): the front
leases before it forwards `POST /sessions` (the worker reads the lease from `LEASE_HEADER`), gathers
every worker's mutations (`GET /mutations`) and carries the session's interference on the finish (and
the preview) it forwards (`INTERFERENCE_HEADER`), as the start carries the lease.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import time
import zlib
from typing import Annotated, Any
from urllib.parse import unquote

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, ConfigDict, StrictBool, StrictStr, ValidationError
from starlette.responses import Response

from webarena_live.control.bodies import ControlError, parse_json_body
from webarena_live.control.context import ControlContext, StartPlan, find_session
from webarena_live.control.errors import JsonResponse, as_control_error
from webarena_live.control.models import Abandon, SessionName
from webarena_live.evaluator import site_key
from webarena_live.replicas import Lease, PoolError, lease_of, no_interference, read_lease, write_lease
from webarena_live.replicas.reset import ResetOutcome, reset_sites, sites_without_reset
from webarena_live.runs.sessions import NoticeKind, Session
from webarena_live.runs.settings import SessionState

logger = logging.getLogger("webarena_live.replicas")

INTERFERENCE_LISTED = 100
"""Mutations an interference lists (the first ones); `count` says how many there were."""


def front_lease(ctx: ControlContext, header: str, session: str) -> Lease:
    """The lease a front gave (`LEASE_HEADER`); a 400 when it does not fit this worker's site map."""
    try:
        indexes = {site_key(str(k)): int(v) for k, v in json.loads(header).items()}
        return lease_of(ctx.site_map, indexes, session)
    except (ValueError, AttributeError, KeyError, TypeError):
        raise ControlError(400, "bad_lease", f"the front's lease {header!r} names no replica here") from None


async def lease_for(ctx: ControlContext, plan: StartPlan, *, wait: float, header: str | None) -> Lease | None:
    """The replicas the planned session works on: the front's, when a front leases (`header`), else one
    per site of its task from this process's pool (a resumed session's own, as it was); None when no
    site map is loaded. Raises the pool's 503 when no replica fits within `wait` seconds."""
    if header is not None:
        return front_lease(ctx, header, plan.name)
    pool = ctx.pool
    if pool is None:
        return None
    kept = None
    if plan.journal is not None and (before := read_lease(plan.journal)) is not None and not before.ended:
        kept = {s: i for s, i in before.indexes.items() if s in pool.replicas and i < len(pool.replicas[s])}
    try:
        return await pool.lease(plan.name, plan.task, wait=wait, keep=kept)
    except PoolError as error:
        raise as_control_error(error) from None


async def reset_leased(ctx: ControlContext, name: str, timeout: float) -> list[ResetOutcome] | None:
    """`"reset": true` with a pool: reset the session's own replicas; None without a pool here."""
    if ctx.pool is None or name not in ctx.pool.leases:
        return None
    try:
        return await ctx.pool.reset_leased(name, timeout)  # a failure gives the lease back
    except PoolError as error:
        raise as_control_error(error) from None


async def reset_first(ctx: ControlContext, sites: tuple[str, ...], timeout: float) -> list[ResetOutcome]:
    """Reset the task's sites before the session starts; refuses (nothing started) unless all succeed."""
    missing = sites_without_reset(ctx.site_map, sites)
    if missing:
        detail = (
            f"no reset_url in the site map for {', '.join(missing)}; add one per site, or start without reset"
        )
        raise ControlError(409, "reset_unavailable", detail)
    outcomes = await reset_sites(ctx.site_map, sites, timeout=timeout)
    if not all(outcome.ok for outcome in outcomes):
        raise ControlError(502, "reset_failed", [outcome.view() for outcome in outcomes])
    return outcomes


def release(ctx: ControlContext, name: str, reason: str) -> None:
    if ctx.pool is not None:
        ctx.pool.release(name, reason)


class FrontInterference(BaseModel):
    """The interference a fleet's front carries on a finish or preview it forwards (`INTERFERENCE_HEADER`):
    its pool's `interference` as `listed`, and the workers that did not tell their mutations."""

    model_config = ConfigDict(extra="allow")

    exposed: StrictBool
    count: int = 0
    mutations: list[dict[str, Any]] = []
    replicas: dict[str, str] = {}


class LeaseEnd(BaseModel):
    """Body of `PUT /sessions/{s}/lease_ended`: a front telling a worker the lease it gave ended."""

    model_config = ConfigDict(extra="forbid")

    ended: StrictStr
    reason: StrictStr | None = None


def encode_interference(interference: dict[str, Any]) -> str:
    """A header value for `interference`: its JSON, compressed (a hundred listed URLs repeat much) and
    in URL-safe base64 (a header holds latin-1 only; a URL may not be)."""
    packed = zlib.compress(json.dumps(interference, separators=(",", ":")).encode(), 6)
    return base64.urlsafe_b64encode(packed).decode("ascii")


def decode_interference(header: str) -> dict[str, Any]:
    """The interference `encode_interference` wrote; a 400 when the header holds none."""
    try:
        document = json.loads(zlib.decompress(base64.urlsafe_b64decode(header.encode("ascii"))))
        return FrontInterference.model_validate(document).model_dump()
    except (ValueError, binascii.Error, zlib.error, ValidationError):
        raise ControlError(400, "bad_interference", "the front's interference header holds none") from None


def interference_of(ctx: ControlContext, session: Session, given: str | None = None) -> dict[str, Any]:
    """What a finish or a preview reports: this process's pool's word when it has one (the single
    process); else, on a fleet's worker (which keeps no pool: `proxy/leases.py`, `pool_for`), the
    front's, carried on the request (`given`, the `INTERFERENCE_HEADER`); else none. A client's header
    never overrides a pool's word."""
    if ctx.pool is not None:
        return listed(ctx.pool.interference(session.name, since=session.attempt.started))
    if given is not None:
        return decode_interference(given)
    return no_interference()


def listed(interference: dict[str, Any]) -> dict[str, Any]:
    """The interference with at most `INTERFERENCE_LISTED` mutations listed and all of them counted."""
    mutations = interference.get("mutations", [])
    return {**interference, "count": len(mutations), "mutations": mutations[:INTERFERENCE_LISTED]}


def abandon(ctx: ControlContext, session: Session, reason: str | None, ended: str = "abandoned") -> Lease:
    """End `session`'s lease before its finish (`ended`: `abandoned`, or what a front says: `timeout`,
    `lost`): this process's pool gives the replicas back now; the attempt's record (the same lease
    object, or on a worker its own) says so, beside its journal too. From now on the proxy forwards
    nothing more for the session (`proxy/leases.py`: `hold`); a finish still judges what was captured,
    with `lease_ended`. A lease that ended already stays as it ended."""
    attempt = session.attempt
    lease = attempt.lease
    if lease is None:  # no replicas to give back (no pool here): the session still ends its lease
        lease = attempt.lease = Lease({}, {}, session=session.name, started=attempt.started)
    if lease.ended_early is None:
        if ctx.pool is not None and ctx.pool.leases.get(session.name) is lease:
            if ended == "abandoned":
                ctx.pool.abandon(session.name, reason)
            else:
                lease.end(ended, reason)
                ctx.pool.release(session.name, ended)
        else:
            lease.end(ended, reason)
        logger.warning(
            "webarena-live: session %s's lease ended (%s%s): replicas given back, its requests refused",
            session.name, ended, f": {reason}" if reason else "",
        )  # fmt: skip
        if attempt.journal is not None:
            write_lease(attempt.journal.path, lease)
        ctx.sessions.notices.publish(session, NoticeKind.POOL, {"kind": "release", "reason": ended})
    return lease


def lease_router(documented: dict[str, dict[int | str, dict[str, Any]]]) -> APIRouter:
    """`POST /sessions/{s}/abandon`, `GET /mutations` (what a front gathers from its workers) and
    `PUT /sessions/{s}/lease_ended` (a front telling a worker the lease it gave ended)."""
    router = APIRouter()

    @router.post(
        "/sessions/{session}/abandon",
        summary="give the session's replicas back now: its lease ends (abandoned), its finish says so",
        responses=documented["abandon"],
    )
    async def post_abandon(session: SessionName, request: Request, body: Abandon | None = None) -> Response:
        ctx: ControlContext = request.app.state.control
        found = find_session(ctx, unquote(session))
        if found.task is None:
            raise ControlError(409, "no_task", f"session {found.name!r} has no task; nothing to abandon")
        if found.attempt.state is SessionState.FINISHED:
            raise ControlError(
                409, "already_finished", f"session {found.name!r} is finished; its lease ended"
            )
        lease = abandon(ctx, found, body.reason if body is not None else None)
        return JsonResponse({"session": found.name, "lease_ended": lease.ended_early,
                             "reason": lease.ended_detail, "replicas": dict(lease.replicas)})  # fmt: skip

    @router.put("/sessions/{session}/lease_ended", include_in_schema=False)
    async def put_lease_ended(session: SessionName, request: Request) -> Response:
        ctx: ControlContext = request.app.state.control
        found = find_session(ctx, unquote(session))
        try:
            end = LeaseEnd.model_validate(parse_json_body(await request.body()))
        except ValidationError:
            raise ControlError(400, "bad_lease_end", "an object with a string `ended`") from None
        if found.attempt.state is not SessionState.FINISHED:
            abandon(ctx, found, end.reason, end.ended)
        return JsonResponse({"session": found.name})

    @router.get(
        "/mutations",
        summary="the mutations this proxy saw on the site map's replicas, after a sequence number",
        responses=documented["mutations"],
    )
    async def get_mutations(
        request: Request,
        after: Annotated[int, Query(ge=0, description="the last sequence number seen")] = 0,
        active_after: Annotated[
            float | None, Query(description="the `now` of the last answer: `active` lists the uses since")
        ] = None,
    ) -> Response:
        ctx: ControlContext = request.app.state.control
        log = ctx.mutations
        mutations = log.mutations_after(after) if log is not None else []
        now = time.time()  # before reading: a use at this very moment is told again next time, not lost
        # when each leased session last used its lease, so a front's --lease-timeout counts idle time;
        # read from the uses since the front's last ask, never by walking every session
        active = ctx.lease_use.since(active_after)
        reads = log.reads_view() if log is not None else {}  # what a front's /health sums
        return JsonResponse(
            {"mutations": mutations, "epoch": log.epoch if log is not None else None, "active": active,
             "now": now, "reads": reads}
        )  # fmt: skip

    return router
