"""The replica work behind the session routes: a lease at the start, the interference at the finish,
the release after it (docs/architecture.md, Replicas). A thin adapter of the pool (`replicas/`): its
refusals become JSON errors here (`as_control_error`).

In one process the pool is the control API's own (`ControlContext.pool`). Under `serve --workers` the
front holds the pool and a worker has none, only its mutation log (`ControlContext.mutations`) and a view
of each lease its front told it: the front leases before it forwards `POST /sessions`, tells a lease's end
(`PUT /sessions/{s}/lease_ended`), gathers every worker's mutations (`GET /mutations`) and carries the
session's interference on the finish (and the preview) it forwards — all of it typed in `control/wire.py`.
"""

from __future__ import annotations

import logging
from typing import Any

from webarena_live.control.bodies import ControlError
from webarena_live.control.context import ControlContext
from webarena_live.control.errors import as_control_error
from webarena_live.control.start_plan import StartPlan
from webarena_live.control.wire import decode_interference, lease_view
from webarena_live.replicas import EndReason, Lease, PoolError, no_interference
from webarena_live.replicas.reset import ResetOutcome, reset_sites, sites_without_reset
from webarena_live.runs.sessions import Session

logger = logging.getLogger("webarena_live.replicas")

INTERFERENCE_LISTED = 100
"""Mutations an interference lists (the first ones); `count` says how many there were."""


async def lease_for(ctx: ControlContext, plan: StartPlan, *, wait: float, header: str | None) -> Lease | None:
    """The replicas the planned session works on: the front's, when a front leases (`header`), else one
    per site of its task from this process's pool (a resumed session's own, as it was); None when no
    site map is loaded. Raises the pool's 503 when no replica fits within `wait` seconds."""
    if header is not None:
        return lease_view(header, ctx.site_map, plan.name)
    pool = ctx.pool
    if pool is None:
        return None
    try:  # a resumed session's own lease, as it was: an ended one stays ended
        return await pool.lease(plan.name, plan.task, wait=wait, resume=plan.resumed is not None)
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
        ctx.pool.end_lease(name, EndReason(reason))


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


def abandon(
    ctx: ControlContext, session: Session, reason: str | None, ended: EndReason = EndReason.ABANDONED
) -> Lease:
    """End `session`'s lease before its finish (`ended`: `abandoned`, or what a front says: `timeout`,
    `lost`). With a pool here, the pool ends it (`ReplicaPool.end_lease`: on disk, then the replicas
    back); on a fleet's worker the view takes the end its front wrote. From now on the proxy forwards
    nothing more for the session (`proxy/leases.py`: `hold`); a finish still judges what was captured,
    with `lease_ended`. A lease that ended already stays as it ended."""
    attempt = session.attempt
    lease = attempt.lease
    if lease is None:  # no replicas (no site map): the session still ends its lease
        lease = attempt.lease = Lease({}, {}, session=session.name, started=attempt.started)
    if lease.ended is None:
        if ctx.pool is not None and ctx.pool.leases.get(session.name) is lease:
            ctx.pool.end_lease(session.name, ended, reason)  # tells `lease_ended` (the context)
        else:
            lease.copy_end(ended, reason)
            ctx.ends.lease_ended(lease)
    return lease
