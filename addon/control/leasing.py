"""The replica work behind the session routes: a lease at the start, the interference at the finish,
the release after it (docs/architecture.md, Replicas).

In one process the pool is the control API's own (`ControlContext.pool`). Under `serve --workers` the
front holds the pool: it leases before it forwards `POST /sessions` (the worker reads the lease from
`LEASE_HEADER`), gathers every worker's mutations (`GET /mutations`) and hands the session's
interference to its worker (`PUT /sessions/{s}/interference`) before it forwards the finish.
"""

from __future__ import annotations

import json
from typing import Annotated, Any
from urllib.parse import unquote

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from webarena_live.control.bodies import ControlError, parse_json_body
from webarena_live.control.context import ControlContext, StartPlan, find_session
from webarena_live.control.errors import JsonResponse
from webarena_live.control.models import SessionName
from webarena_live.control.replicas import ReplicaPool
from webarena_live.control.reset import ResetOutcome, reset_sites, sites_without_reset
from webarena_live.evaluator import placeholder, site_key
from webarena_live.runs.leases import AttemptLease, read_lease
from webarena_live.runs.sessions import Session

LEASE_HEADER = "X-WebArena-Live-Lease"
"""Set by a fleet's front on the `POST /sessions` it forwards: the session's lease, `{site: index}`."""
INTERFERENCE_LISTED = 100
"""Mutations an interference lists (the first ones); `count` says how many there were."""
NO_INTERFERENCE: dict[str, Any] = {"exposed": False, "count": 0, "mutations": [], "replicas": {}}


def attempt_lease(pool: ReplicaPool, indexes: dict[str, int]) -> AttemptLease:
    urls = {placeholder(site): pool.replicas[site][index].url for site, index in indexes.items()}
    return AttemptLease(dict(indexes), urls)


def front_lease(ctx: ControlContext, header: str) -> AttemptLease:
    """The lease a front gave (`LEASE_HEADER`); a 400 when it does not fit this worker's site map."""
    pool = ctx.pool
    try:
        indexes = {site_key(str(k)): int(v) for k, v in json.loads(header).items()}
        if pool is None or any(not 0 <= i < len(pool.replicas[s]) for s, i in indexes.items()):
            raise ValueError(header)
    except (ValueError, AttributeError, KeyError, TypeError):
        raise ControlError(400, "bad_lease", f"the front's lease {header!r} names no replica here") from None
    return attempt_lease(pool, indexes)


async def lease_for(
    ctx: ControlContext, plan: StartPlan, *, wait: float, header: str | None
) -> AttemptLease | None:
    """The replicas the planned session works on: the front's, when a front leases (`header`), else one
    per site of its task from this process's pool (a resumed session's own, as it was); None when no
    site map is loaded. Raises the pool's 503 when no replica fits within `wait` seconds."""
    if header is not None:
        return front_lease(ctx, header)
    pool = ctx.pool
    if pool is None or not ctx.leases_here:
        return None
    kept = None
    if plan.journal is not None and (before := read_lease(plan.journal)) is not None:
        kept = {s: i for s, i in before.indexes.items() if s in pool.replicas and i < len(pool.replicas[s])}
    lease = await pool.lease(plan.name, plan.task, wait=wait, keep=kept)
    return attempt_lease(pool, lease.replicas)


async def reset_leased(ctx: ControlContext, name: str, timeout: float) -> list[ResetOutcome] | None:
    """`"reset": true` with a pool: reset the session's own replicas; None without a pool here."""
    if ctx.pool is None or not ctx.leases_here or name not in ctx.pool.leases:
        return None
    outcomes = await ctx.pool.reset_leased(name, timeout)
    if not all(outcome.ok for outcome in outcomes):
        ctx.pool.release(name, "reset failed")
        raise ControlError(502, "reset_failed", [outcome.model_dump() for outcome in outcomes])
    return outcomes


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
        raise ControlError(502, "reset_failed", [outcome.model_dump() for outcome in outcomes])
    return outcomes


def release(ctx: ControlContext, name: str, reason: str) -> None:
    if ctx.pool is not None and ctx.leases_here:
        ctx.pool.release(name, reason)


def interference_of(ctx: ControlContext, session: Session, *, keep: bool = False) -> dict[str, Any]:
    """What a finish (or, with `keep`, a preview) reports: the front's word (a worker), else this
    process's pool's."""
    given = (
        ctx.front_interference.get(session.name) if keep else ctx.front_interference.pop(session.name, None)
    )
    if given is not None:
        return given
    if ctx.pool is None or not ctx.leases_here:
        return dict(NO_INTERFERENCE)
    return listed(ctx.pool.interference(session.name, since=session.attempt.started))


def listed(interference: dict[str, Any]) -> dict[str, Any]:
    """The interference with at most `INTERFERENCE_LISTED` mutations listed and all of them counted."""
    mutations = interference.get("mutations", [])
    return {**interference, "count": len(mutations), "mutations": mutations[:INTERFERENCE_LISTED]}


def lease_router(documented: dict[int | str, dict[str, Any]]) -> APIRouter:
    """`GET /mutations` (what a front gathers from its workers) and `PUT /sessions/{s}/interference`
    (what a front hands a worker before the session's finish)."""
    router = APIRouter()

    @router.get(
        "/mutations",
        summary="the mutations this proxy saw on the site map's replicas, after a sequence number",
        responses=documented,
    )
    async def get_mutations(
        request: Request, after: Annotated[int, Query(ge=0, description="the last sequence number seen")] = 0
    ) -> Response:
        ctx: ControlContext = request.app.state.control
        mutations = ctx.pool.mutations_after(after) if ctx.pool is not None else []
        return JsonResponse({"mutations": mutations, "epoch": id(ctx.pool) if ctx.pool is not None else None})

    @router.put("/sessions/{session}/interference", include_in_schema=False)
    async def put_interference(session: SessionName, request: Request) -> Response:
        ctx: ControlContext = request.app.state.control
        found = find_session(ctx, unquote(session))
        document = parse_json_body(await request.body())
        if not isinstance(document, dict) or not isinstance(document.get("exposed"), bool):
            raise ControlError(400, "bad_interference", "an object with a boolean `exposed`")
        ctx.front_interference[found.name] = document
        return JsonResponse({"session": found.name})

    return router
