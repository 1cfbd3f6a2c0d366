"""One place that starts and ends a session in this process (docs/architecture.md, Sessions).

A start is plan → lease (the context's `Authority`) → reset → address → begin, with the lease given
back when any step after the lease refuses; `POST /sessions` (control/app.py) only reads the request
and calls `start_session`, on the single process and on a fleet's worker alike (the worker takes its
front's lease from a header).

An end is one notice: the `finished` notice of a session frees its proxy address and its lease
(`context.SessionEnds`, which every control context subscribes), whoever finished it; an abandon or an
idle lease ends the lease alone (its address stays, so the proxy can answer the session's late requests
with the ended lease's page and count them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from webarena_live.control.authority import reset_first
from webarena_live.control.bodies import ControlError
from webarena_live.control.context import ControlContext
from webarena_live.control.models import StartSession
from webarena_live.control.start_plan import begin_session, plan_start
from webarena_live.replicas import EndReason
from webarena_live.replicas.reset import ResetOutcome
from webarena_live.runs.fault_plan import FaultsError, parse_faults


@dataclass(frozen=True)
class StartHeaders:
    """What a fleet's front (or the addon, for the caller) adds to a `POST /sessions` it forwards."""

    caller: str | None = None
    """The caller's session from its proxy credentials (decoded): named when the body names none."""
    port: int | None = None
    """The port the front's placement chose for the session's address."""
    lease: str | None = None
    """The front's lease, `{site: index}` as JSON."""
    client: str | None = None
    """Who may use the address beyond loopback: the client the front served (else the request's)."""


async def start_session(ctx: ControlContext, start: StartSession, headers: StartHeaders) -> dict[str, Any]:
    """Start (or restart) the session `start` asks for and answer what the agent needs; raises
    `ControlError` having changed nothing (the lease it took is given back)."""
    try:  # read before anything is taken: a mistaken plan changes nothing
        faults = parse_faults(start.faults, source="faults") if start.faults is not None else None
    except FaultsError as error:
        raise ControlError(400, "bad_faults", str(error)) from None
    plan = plan_start(ctx, start, caller=headers.caller)
    lease = await ctx.authority.lease(  # may wait; 503 when none fits
        plan.name, plan.task, wait=start.wait, resume=plan.resumed is not None, told=headers.lease
    )
    guests = {"client": headers.client, "near": start.near}
    address = None
    try:
        ended = lease is not None and lease.ended is not None  # resumed ended: it may reset nothing
        outcomes = await _reset(ctx, plan.name, plan.task.sites, start) if start.reset and not ended else None
        if plan.resumed is None:  # the address first: a refusal (503) then changes nothing
            address = await _claim(ctx, plan.name, headers.port, guests)
    except ControlError:
        ctx.authority.end(plan.name, EndReason.REFUSED)
        raise
    reply = begin_session(ctx, plan, lease)
    if faults is not None and (session := ctx.sessions.get(plan.name)) is not None:
        # before the agent has its reply: before its first request
        ctx.sessions.give_fault_plan(session, faults)
    if plan.resumed is not None:  # resumed (a restarted worker): the journal's events first, then the
        # port opens, since agents that already hold the address send as soon as it listens
        address = await _claim(ctx, plan.name, headers.port, guests)
    if address is not None:  # the session holds it too (proxy/session_addresses.py writes it there)
        reply["proxy"] = address
        secret = ctx.addresses.secret_of(plan.name) if ctx.addresses is not None else None
        if secret:  # beyond loopback: the password that lets any client in
            reply["secret"] = secret
    if outcomes is not None:
        reply["reset"] = [outcome.view() for outcome in outcomes]
    return reply


async def _reset(
    ctx: ControlContext, name: str, sites: tuple[str, ...], start: StartSession
) -> list[ResetOutcome]:
    """`"reset": true`: the session's own replicas when this process leases them, else the task's sites."""
    outcomes = await ctx.authority.reset_leased(name, start.reset_timeout)
    return outcomes if outcomes is not None else await reset_first(ctx, sites, start.reset_timeout)


async def _claim(ctx: ControlContext, name: str, port: int | None, guests: dict[str, Any]) -> str | None:
    return await ctx.addresses.claim(name, port, **guests) if ctx.addresses is not None else None
