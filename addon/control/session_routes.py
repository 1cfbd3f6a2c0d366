"""The sessions' router, `/sessions`: start one (`POST /sessions`, `control/starts.py`), list them, read
one's state, trace, HAR and proxy auto-config, and finish it with the agent's final response; and the
routes of one session kept beside their concerns, included here under its prefix and guard: its event
stream (`event_routes`), its progress and preview (`agent_routes`), its lease (`lease_routes`)."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import quote, unquote

from fastapi import APIRouter, Header, Query, Request
from pydantic import ValidationError
from starlette.responses import Response

from webarena_live.addresses.headers import (
    CALLER_HEADER,
    CLIENT_HEADER,
    EARLIER_ATTEMPT_HEADER,
    INTERFERENCE_HEADER,
    LEASE_HEADER,
    PROXY_PORT_HEADER,
    REPEATED_HEADER,
    SESSION_HEADER,
)
from webarena_live.control import agent_routes, event_routes, lease_routes, models
from webarena_live.control.bodies import parse_final_response, parse_json_body
from webarena_live.control.context import Control, ControlContext
from webarena_live.control.dependencies import GUARD, PathSession
from webarena_live.control.errors import BadRequest, Conflict, ControlError, JsonResponse, validation_detail
from webarena_live.control.pac import PAC_MEDIA_TYPE, proxy_auto_config
from webarena_live.control.responses import documented, guarded, json_body
from webarena_live.control.starts import StartHeaders, start_session
from webarena_live.control.views import list_sessions
from webarena_live.evaluator import trace_to_har
from webarena_live.runs.finish_outcome import FinishRefused, OutputsFailed, no_task_detail
from webarena_live.runs.sessions import Session
from webarena_live.runs.settings import SessionState

router = APIRouter(prefix="/sessions", tags=["sessions"], dependencies=[GUARD], responses=guarded())

Since = Annotated[int, Query(description="first event index to return")]
StatusFilter = Annotated[
    list[int] | None,
    Query(
        description="only the events with one of these response statuses (0: no response), e.g. "
        "status=0&status=502: what the rewards read to tell a site that never answered"
    ),
]


@router.get("", summary="every session, and resumable runs", responses=documented(models.SessionList))
async def get_sessions(ctx: Control) -> Response:
    return JsonResponse({"sessions": list_sessions(ctx)})


@router.post(
    "",
    summary="start (or restart, clearing its trace) a session on a task",
    responses=documented(models.Started, 400, 409, 502, 503),
    openapi_extra=json_body("StartSession"),
)
async def post_session(
    request: Request,
    ctx: Control,
    caller: Annotated[str | None, Header(alias=CALLER_HEADER, include_in_schema=False)] = None,
    port: Annotated[int | None, Header(alias=PROXY_PORT_HEADER, include_in_schema=False)] = None,
    leased: Annotated[str | None, Header(alias=LEASE_HEADER, include_in_schema=False)] = None,
    client: Annotated[str | None, Header(alias=CLIENT_HEADER, include_in_schema=False)] = None,
) -> Response:
    try:
        start = models.StartSession.model_validate(parse_json_body(await request.body()))
    except ValidationError as error:
        raise BadRequest("bad_request", validation_detail(error.errors())) from None
    client = client or (request.client.host if request.client else None)
    caller = unquote(caller) if caller else None
    headers = StartHeaders(caller=caller, port=port, lease=leased, client=client)
    return JsonResponse(await start_session(ctx, start, headers))


@router.get("/{session}", summary="state, task, event counts", responses=documented(models.SessionView))
async def get_session(found: PathSession) -> Response:
    return JsonResponse(found.describe())


@router.get("/{session}/trace", summary="events captured so far", responses=documented(models.Trace, 400))
async def get_trace(found: PathSession, since: Since = 0, status: StatusFilter = None) -> Response:
    events = list(found.events_view(since))
    if status is not None:  # `count` stays the whole trace's
        wanted = set(status)
        events = [event for event in events if event.get("status") in wanted]
    return JsonResponse({"session": found.name, "count": len(found.trace), "events": events})


@router.post(
    "/{session}/finish",
    summary="evaluate the agent's final response against the session's trace",
    responses=documented(models.Result, 400, 409, 507),
    openapi_extra=json_body("FinalResponse"),
)
async def post_finish(found: PathSession, request: Request, ctx: Control) -> Response:
    given = request.headers.get(INTERFERENCE_HEADER)  # a fleet's front names it (control/authority.py)
    answer = finish(ctx, found, await request.body(), given)
    if ctx.addresses is not None:
        await ctx.addresses.settle()  # the session's address is closed when the agent hears back
    return answer


@router.get("/{session}/har", summary="the trace as HAR 1.2", responses=documented(models.Har))
async def get_har(found: PathSession) -> Response:
    return JsonResponse(trace_to_har(found.trace))


@router.get(
    "/{session}/proxy.pac",  # public (control/guard.py): the browser fetches it with no token
    summary="a proxy auto-config file: the session's traffic to its own address, static assets DIRECT",
    responses={
        200: {"content": {PAC_MEDIA_TYPE: {"schema": {"type": "string"}}}},
        **documented(models.ErrorBody, 409),
    },
)
async def get_proxy_pac(found: PathSession) -> Response:
    if found.proxy is None:
        detail = (
            f"session {found.name!r} holds no proxy address (start it with POST /sessions; "
            "a finish releases it)"
        )
        raise Conflict("no_address", detail)
    return Response(proxy_auto_config(found.proxy), media_type=PAC_MEDIA_TYPE)


for part in (event_routes.of_session, agent_routes.of_session, lease_routes.of_session):
    router.include_router(part)


def finish(ctx: ControlContext, session: Session, body: bytes, interference: str | None = None) -> Response:
    """The finish route's work: the session's attempt judges, the answer is its `eval_result.json`.
    `interference`: what a fleet's front carried (`INTERFERENCE_HEADER`)."""
    if session.task is None:  # before reading the body, as any request to a session without a task
        raise Conflict("no_task", no_task_detail(session.name))
    response = parse_final_response(body)
    finished = session.attempt.state is SessionState.FINISHED  # a repeat: no new interference to take
    try:
        with ctx.finish_guard():
            named = None if finished else ctx.authority.interference(session, interference)
            outcome = session.finish(response, interference=named)
    except FinishRefused as refused:
        raise Conflict(refused.reason, refused.detail_body) from None
    except OutputsFailed as error:
        raise ControlError(507, "output_failed", str(error)) from None
    timings = outcome.timings
    # Where the agent's wait went (standard Server-Timing, milliseconds); the benchmarks read it.
    timing = f"evaluate;dur={timings['evaluate'] * 1000:.3f}, total;dur={timings['total'] * 1000:.3f}"
    # Percent-encoded: a session name may hold characters a header value cannot.
    headers = {SESSION_HEADER: quote(session.name), "Server-Timing": timing}
    if outcome.earlier_attempt:
        headers[EARLIER_ATTEMPT_HEADER] = quote(outcome.earlier_attempt)
    # eval_result.json, with `interference` and whether the sites answered (rewards read both)
    answer = {**outcome.result.to_dict(), **outcome.sites}
    if outcome.repeated:  # the front forwards it and does none of a first finish's work again
        headers[REPEATED_HEADER] = "true"
    return JsonResponse(answer, headers=headers)  # its `finished` notice freed its address and lease
