"""The mitmproxy side of faults made on purpose (`runs/fault_plan.py`): `WebArenaLive`'s sub-addon for
its option (`webarena_faults`), whose per-flow steps `WebArenaLive` calls from its own hooks once it has
named the flow's session (not hooks of their own: mitmproxy's dispatch of a hook costs every flow).

In `on_request` it draws each request to a site of the map against the session's own plan (its
`POST /sessions` `faults`) or the proxy's (`webarena_faults`); a drawn fault is recorded in the attempt
(`faults_injected`) and on the flow (`FAULT_KEY`), then made: an error answer given here, the connection
killed (the capture records it as no answer), or a pause before the request goes on. A `slow_body`
fault pauses in `on_response`, after `WebArenaLive` captured the answer. The events stay in the
trace as the agent saw them; a session that draws nothing is untouched.

A `latency` fault whose client gave up before any answer came (its timeout shorter than the pause, or
than the pause and the site's answer together) is the fault's doing, not the site's: `on_error` lists it
as it ended (`failing`, `client_gave_up`), so that the finish does not count it as the site's failure.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Awaitable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from mitmproxy import ctx, exceptions, http
from mitmproxy.connection import ConnectionState

from webarena_live.proxy.connections import SESSION_KEY, SKIP_KEY
from webarena_live.runs.fault_log import FaultLine
from webarena_live.runs.fault_plan import (
    FAULT_KEY,
    FaultPlan,
    FaultsError,
    choose,
    fault_page,
    fault_record,
    fault_status,
    plan_summary,
    read_faults,
    site_and_path,
)
from webarena_live.runs.sessions import DEFAULT_SESSION, Session

if TYPE_CHECKING:
    from webarena_live.proxy.addon import WebArenaLive
    from webarena_live.runs.attempt import Attempt

logger = logging.getLogger(__name__)

COUNTED_KEY = "webarena_fault_counted"
"""On a flow whose request the draws counted (`flow.metadata`): its `error` hook counts it no more."""
DRAWN_KEY = "webarena_fault_drawn"
"""On a faulted flow (`flow.metadata`): what its draw counted, `[method, URL as the site map writes it,
seen]` (plain values: mitmproxy may save a flow's metadata), to journal its fault again as it ended."""


class Counted(NamedTuple):
    """A request the draws counted: whose it is, and their inputs."""

    session: Session
    attempt: Attempt
    plan: FaultPlan
    url: str
    """As the site map writes it (`__SHOPPING__/p/1`)."""
    where: tuple[str, str]
    """Its site and its path there."""
    seen: int
    """How many requests of its method and URL came before."""


class FaultInjector:
    """Makes the faults a plan draws; `live` is the addon whose sessions and site map it reads."""

    def __init__(self, live: WebArenaLive) -> None:
        self.live = live
        self.plan: FaultPlan | None = None
        """The proxy's plan (`webarena_faults`); None: no fault but a session's own."""
        live.extra_health["faults"] = None
        self._seen: weakref.WeakKeyDictionary[Attempt, dict[tuple[str, str], int]] = (
            weakref.WeakKeyDictionary()
        )
        """Per attempt, how many requests of each method and URL it sent: one input of each draw (a
        resumed attempt's count starts from its journal's requests)."""

    def _session_plans(self) -> bool:
        """Whether any session has a plan of its own (the session store's word): else only the proxy's."""
        context = self.live.context
        return context is not None and context.sessions.fault_plans_given

    def configure(self, updated: set[str]) -> None:
        if "webarena_faults" not in updated:
            return
        path = ctx.options.webarena_faults
        try:
            self.plan = read_faults(path) if path else None
        except FaultsError as error:
            raise exceptions.OptionsError(f"webarena_faults: {error}") from None
        # `/health`'s `faults` (None: no plan of the proxy's) and the banner's line
        source = str(Path(path).expanduser().resolve()) if path else ""
        self.live.extra_health["faults"] = plan_summary(self.plan, source) if self.plan else None

    def on_request(self, flow: http.HTTPFlow) -> Any:
        """A request of a named session: counted, and its drawn fault made; an awaitable when it
        pauses. One the proxy answered already (`--confine`'s refusal) is counted, as the journal
        holds it, and never faulted."""
        if self.plan is None and not self._session_plans():
            return None  # every flow passes here: without a plan, this is all it costs
        counted = self._count(flow)
        if counted is None or flow.response is not None:
            return None
        session, attempt, plan, derendered, where, count = counted
        request = flow.request
        url, method = request.url, request.method
        # drawn on the URL as the site map writes it: the same on any replica, port or deployment
        chosen = choose(
            plan,
            session=session.name,
            method=method,
            url=derendered,
            seen=count,
            site=where[0],
            path=where[1],
        )
        if chosen is None:
            return None
        index, rule = chosen
        record = fault_record(index, rule, method=method, url=url, site=where[0])
        attempt.add_fault(FaultLine(record, method, derendered, count))
        flow.metadata[FAULT_KEY] = record
        flow.metadata[DRAWN_KEY] = [method, derendered, count]
        logger.info(
            "webarena-live: session %s: fault %s injected into %s %s", session.name, rule.fault, method, url
        )
        if rule.fault == "status":
            headers = {"Content-Type": rule.content_type, "Cache-Control": "no-store"}
            flow.response = http.Response.make(fault_status(rule), fault_page(rule), headers)
        elif rule.fault == "drop":
            flow.kill()
        elif rule.fault == "latency":
            return asyncio.sleep(rule.seconds or 0)
        return None

    def on_error(self, flow: http.HTTPFlow) -> None:
        """A flow that ended before its `request` hook (its client left mid-body, a body over the
        limit): counted as its journaled event will be, never faulted. A `latency` fault's whose client
        gave up: listed and journaled as it ended, before its event is captured (`WebArenaLive.error`)."""
        if self.plan is None and not self._session_plans():
            return
        if not flow.metadata.get(COUNTED_KEY):
            self._count(flow)
        elif (drawn := flow.metadata.get(DRAWN_KEY)) is not None and client_gave_up(flow):
            self._gave_up(flow, drawn)

    def _gave_up(self, flow: http.HTTPFlow, drawn: list[Any]) -> None:
        """The client left a request a `latency` fault held (or the site then answered too late for it):
        no answer, and the fault's doing, in the attempt it was made in while that attempt runs."""
        record, context = flow.metadata.get(FAULT_KEY), self.live.context
        if record is None or record["fault"] != "latency" or context is None:
            return
        session = context.sessions.get(flow.metadata.get(SESSION_KEY) or DEFAULT_SESSION)
        if session is None or session.attempt.finished is not None:
            return  # finished: its outputs say what the finish saw
        attempt = session.attempt
        if any(listed is record for listed in attempt.faults_injected):  # a new start lists it not
            record.update(failing=True, client_gave_up=True)
            attempt.add_fault(FaultLine(record, *drawn))

    def _count(self, flow: http.HTTPFlow) -> Counted | None:
        """Count a request to a site of a session with a task and a plan (None for any other request:
        a session's idle traffic, before any start, is never faulted, its first request or its tenth)."""
        context = self.live.context
        if flow.metadata.get(SKIP_KEY) or flow.is_replay or context is None:
            return None  # a replay is not journaled either
        flow.metadata[COUNTED_KEY] = True
        session = context.sessions.get(flow.metadata.get(SESSION_KEY) or DEFAULT_SESSION)
        if session is None:
            return None
        attempt = session.attempt
        plan = attempt.fault_plan or self.plan
        if plan is None or attempt.finished is not None or attempt.task is None:
            return None  # idle traffic (no task: `default` before a start) is judged by nothing
        derendered = context.site_map.derender(flow.request.url, strict=False)
        where = site_and_path(derendered)
        if where is None:
            return None
        seen = self._seen.get(attempt)
        if seen is None:  # a resumed attempt counts on from its journal's requests
            seen = self._seen[attempt] = attempt.resumed_requests()
        key = (flow.request.method, derendered)
        count = seen.get(key, 0)
        seen[key] = count + 1
        return Counted(session, attempt, plan, derendered, where, count)

    def on_response(self, flow: http.HTTPFlow, captured: Awaitable[Any] | None) -> Awaitable[Any] | None:
        """A captured answer (`captured`: its journal line's awaitable), then a drawn `slow_body`'s pause."""
        record = flow.metadata.get(FAULT_KEY)
        if record is None or record["fault"] != "slow_body" or flow.response is None:
            return captured
        size = len(flow.response.raw_content or b"")
        return _after(captured, size / record["bytes_per_second"])


def client_gave_up(flow: http.HTTPFlow) -> bool:
    """Whether `flow` ended with no answer because its client left: its connection closed (HTTP/1; its
    reader saw the end even while a hook held the flow), or its stream reset by the client (HTTP/2)."""
    if flow.response is not None:
        return False
    if not flow.client_conn.state & ConnectionState.CAN_READ:
        return True
    return flow.error is not None and flow.error.msg.startswith("stream reset by client")


async def _after(captured: Awaitable[Any] | None, seconds: float) -> None:
    """The journal line first, then the pause (made here: a flow whose client left never starts it)."""
    if captured is not None:
        await captured
    await asyncio.sleep(seconds)
