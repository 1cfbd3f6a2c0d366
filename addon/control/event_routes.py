"""The event streams (Server-Sent Events): every session's notices (`GET /events`), and one session's
events as they are captured, then its verdict (`GET /sessions/{s}/events`: `session_routes` includes
`of_session`); `control/streams.py` writes them."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Header, Query, Request
from starlette.responses import Response

from webarena_live.control.context import Control
from webarena_live.control.dependencies import GUARD, PathSession
from webarena_live.control.responses import guarded, stream
from webarena_live.control.streams import global_stream, session_stream

router = APIRouter(prefix="/events", tags=["events"], dependencies=[GUARD], responses=guarded())

of_session = APIRouter(prefix="/{session}")
"""The session's own stream, under the sessions' router (and its guard)."""

Since = Annotated[int, Query(description="first event index to return")]
Tail = Annotated[
    int | None,
    Query(ge=0, description="only the newest this many of the events so far (what follows is not limited)"),
]
EventDetail = Annotated[
    Literal["each", "counts"],
    Query(
        description="`each`: every event as an `event` notice; `counts`: instead, at most one `counts` "
        "notice per session per write (a few a second), with its event counts by type"
    ),
]


def _via_proxy(request: Request) -> bool:
    """Served through the proxy at the reserved host (mitmproxy's ASGI hosting buffers the answer)."""
    return "mitmproxy.master" in request.scope.get("extensions", {})


@of_session.get(
    "/events",
    summary="Server-Sent Events: the events so far, then each as it is captured, then the verdict",
    responses=stream(400)
    | {204: {"description": "the session is finished and the client has everything (Last-Event-ID)"}},
)
async def get_events(
    found: PathSession,
    request: Request,
    ctx: Control,
    since: Since = 0,
    tail: Tail = None,
    last_event_id: Annotated[str | None, Header(include_in_schema=False)] = None,
) -> Response:
    if last_event_id is not None and found.result is not None:
        # A browser's EventSource reconnects whenever a stream ends; after the finish it already has
        # everything, and a 204 is what makes it stop (the HTML standard's "fail the connection").
        return Response(status_code=204, media_type="text/event-stream")
    if last_event_id and last_event_id.strip().isdigit():
        since = max(since, int(last_event_id) + 1)
    return session_stream(
        request.app.state.streams, ctx.sessions, found, since, snapshot=_via_proxy(request), tail=tail
    )


@router.get(
    "",
    summary="Server-Sent Events: every session's notices (session, event, restarted, finished)",
    responses=stream(),
)
async def get_all_events(request: Request, ctx: Control, events: EventDetail = "each") -> Response:
    each_event = events == "each"
    return global_stream(
        request.app.state.streams, ctx.sessions, snapshot=_via_proxy(request), each_event=each_event
    )
