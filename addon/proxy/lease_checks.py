"""Leases on the wire: each request held against its session's lease, each mutation told to the log.

A session's lease names one replica per site of its task (`replicas/pool.py` hands it out). A request
to a replica the session does not hold, or to a host that is no site of the map (and no browser
service), is counted and listed in the session; with `--confine` the proxy answers it itself with a 403
page that says why, so an agent cannot wander into another session's copy or the open web. Every POST,
PUT, PATCH or DELETE that reached a replica goes to the mutation log (`MutationLog.record`), whoever sent
it, with its body: the log keeps the changes (`replicas.changes` judges), the pool reads them there.
The lease itself comes from the context's authority (`control/authority.py`; docs/architecture.md,
Leases).
"""

from __future__ import annotations

import html
import logging
from pathlib import Path
from typing import Any

from mitmproxy import http

from webarena_live.control.authority import Authority, authority_for
from webarena_live.control.context import RESERVED_HOST, ControlContext
from webarena_live.evaluator import (
    MUTATION_METHODS,
    EventRecord,
    SiteMap,
    is_reference_navigation,
    placeholder,
)
from webarena_live.proxy.browser_traffic import is_service_host
from webarena_live.proxy.capture import request_headers, request_origin, request_url
from webarena_live.replicas import Lease, parse_isolation, parse_lease_timeout
from webarena_live.replicas.build import pool_file
from webarena_live.runs.fault_plan import FAULT_KEY
from webarena_live.runs.sessions import Session
from webarena_live.runs.settings import SessionState
from webarena_live.sites import SitesPlan

logger = logging.getLogger(__name__)

REFUSED_KEY = "webarena_live.outside_lease"
"""Set on a flow `--confine` answered with a 403: it never reached a site, so it changed nothing."""
ENDED_STATUS = 410
"""What the proxy answers, itself, to a request of a session whose lease ended before its finish."""


def outside_reason(context: ControlContext, session: Session, url: str, host: str) -> str | None:
    """Why `url` is outside `session`'s lease, or None when it is inside (or the session holds none)."""
    lease = session.attempt.lease
    if lease is None or host == RESERVED_HOST:
        return None
    found = context.site_map.replicas_of(url)
    if not found:
        return None if is_service_host[host] else "no site of the site map"
    if any(lease.holds(site, index) for site, index in found):
        return None
    site, index = found[0]
    held = lease.indexes.get(site)
    if held is None:
        return f"{placeholder(site)} is not a site of the session's task"
    return f"replica {index} of {placeholder(site)}; the session holds replica {held}"


def refusal(url: str, why: str) -> http.Response:
    """The 403 page `--confine` answers: what was refused and why."""
    body = (
        "<!doctype html><meta charset=utf-8><title>Outside this session's sites</title>"
        "<h1>403: outside this session's sites</h1>"
        f"<p>webarena-live refused <code>{html.escape(url)}</code>: {html.escape(why)}.</p>"
        "<p>This proxy runs with <code>--confine</code>: a session reaches only the replicas it holds "
        "(<code>POST /sessions</code> answers them as <code>replicas</code>).</p>"
    )
    return http.Response.make(403, body, {"Content-Type": "text/html; charset=utf-8"})


def inside(site_map: SiteMap, lease: Lease, data: http.RequestData) -> bool:
    """Whether a request (mitmproxy's raw fields) is on a replica `lease` holds, answered from its
    origin alone: False whenever that cannot say (a replica URL with a path, a target that is no path),
    and `outside_reason` then reads the whole URL. Asked of every request, so no URL is built."""
    by_origin = site_map.replicas_by_origin()
    if not by_origin or data.path[:1] != b"/":
        return False
    held = lease.indexes
    for site, index in by_origin.get(request_origin(data), ()):  # noqa: SIM110 (no generator frame)
        if held.get(site) == index:
            return True
    return False


def check(context: ControlContext, session: Session, flow: http.HTTPFlow, *, confine: bool) -> None:
    """Hold a request against its session's lease: count it when outside, refuse it with `confine`."""
    request = flow.request
    lease = session.attempt.lease
    if lease is None or inside(context.site_map, lease, request.data):
        return
    why = outside_reason(context, session, request_url(request), request.host)
    if why is None:
        return
    lease.note_outside(request.method, request.url, why)
    if confine:
        flow.metadata[REFUSED_KEY] = True
        flow.response = refusal(request.url, why)


def record(
    context: ControlContext, session: str, flow: http.HTTPFlow, event: EventRecord | None = None
) -> None:
    """A finished flow, for the pool: its answer when it is judged (a navigation or a mutation: the
    copy's health), and the flow itself when it may have changed a replica (any session's, any lease's).
    What the proxy answered itself (`--confine`, an ended lease) reached no replica; a fault made on
    purpose (`--faults`) says nothing of the copy's health. `event` is the flow's record when the
    capture made one (its method, URL and headers are read from it, not from the flow again)."""
    log = context.mutations
    if log is None or flow.metadata.get(REFUSED_KEY):
        return
    request = flow.request
    if event is not None:
        method, url, headers = event[0], event[1], event[3]
    else:  # no record (a browser service's flow, a record that could not be made): what the rule reads
        method, url, headers = (
            request.method,
            request_url(request),
            request_headers(request.data.headers.fields),
        )
    mutating = method in MUTATION_METHODS
    if (mutating or is_reference_navigation(method, headers)) and not flow.metadata.get(FAULT_KEY):
        response, error = flow.response, flow.error  # a status with an error: the site did answer
        log.answered(url, response.status_code if response is not None else 0,
                     error.msg if error is not None else None)  # fmt: skip
    if not mutating:
        return
    # the body as sent; decoded only when it came compressed (a rule may read it: `replicas.changes`)
    body = (
        request.raw_content
        if "content-encoding" not in request.headers
        else request.get_content(strict=False)
    )
    log.record(request.url, session, method, request.timestamp_start,
               content_type=request.headers.get("content-type", ""), body=body)  # fmt: skip


def authority_of(
    site_map: SiteMap,
    options: Any,
    current: Authority | None,
    *,
    output_dir: Path | None,
    journal_dir: Path | None,
    copies: SitesPlan | None = None,
) -> Authority:
    """The lease authority `--isolation`, `--lease-timeout` and `--front` (`options`: mitmproxy's) call
    for (`authority_for`): the pool of `site_map`, built as a fleet's front builds its own, or on a
    fleet's worker the views its front tells."""
    return authority_for(
        site_map, front=bool(options.webarena_front),
        isolation=parse_isolation(options.webarena_isolation),
        lease_timeout=parse_lease_timeout(options.webarena_lease_timeout), current=current,
        state_file=pool_file(output_dir, journal_dir), reset_at_start=options.webarena_reset_at_start,
        copies=copies,
    )  # fmt: skip


def ended_page(url: str, session: str, reason: str) -> http.Response:
    """The page a session whose lease ended gets instead of the site: what was refused and why."""
    why = {
        "timeout": "it was idle longer than --lease-timeout",
        "abandoned": "it was abandoned (POST /sessions/{s}/abandon)",
        "lost": "its worker or node was lost",
        "finished": "the session finished",
    }.get(reason, reason)
    body = (
        "<!doctype html><meta charset=utf-8><title>This session's lease has ended</title>"
        f"<h1>{ENDED_STATUS}: session {html.escape(session)}'s lease has ended</h1>"
        f"<p>webarena-live did not forward <code>{html.escape(url)}</code>: the session's lease of its "
        f"replicas ended ({html.escape(reason)}: {html.escape(why)}). Its replicas may now serve another "
        "session, so nothing more is forwarded for it. Finish the session (its verdict will say "
        "<code>lease_ended</code>) or start it again.</p>"
    )
    return http.Response.make(ENDED_STATUS, body, {"Content-Type": "text/html; charset=utf-8"})


def hold(context: ControlContext, session: Session, flow: http.HTTPFlow) -> bool:
    """A request of `session`: when its lease ended before its finish, answered here (`ended_page`),
    counted and kept out of the trace (True); else its lease counts it as use (`--lease-timeout`, and
    what `GET /mutations` tells a front: `ControlContext.lease_use`)."""
    lease = session.attempt.lease
    if lease is None:
        return False
    finished = session.attempt.state is SessionState.FINISHED
    if lease.ended_early is None and not finished:
        context.lease_use.used(session.name, lease)
        return False
    # A finished session's replicas are back in the pool too (another session may hold them now): its
    # browser's late requests go no further than an ended lease's.
    lease.refused_after_end += 1
    flow.metadata[REFUSED_KEY] = True
    flow.response = ended_page(flow.request.url, session.name, lease.ended_early or "finished")
    return True
