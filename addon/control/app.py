"""The control API as a FastAPI app: small routes over pydantic models.

Every route is `async`: FastAPI runs plain functions in a thread pool, and the
routes must touch the sessions from the proxy's event loop thread, as capture
does, so nothing needs a lock. Bodies are read raw and parsed by
control/bodies.py (bounded nesting, answers inside a ```json fence, any
Content-Type, as curl's `-d` sends) and then validated by the model; the
models document the bodies in `/openapi.json`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal
from urllib.parse import quote, unquote

from fastapi import FastAPI, Header, Query, Request
from fastapi.openapi.utils import get_openapi
from pydantic import ValidationError
from starlette.responses import FileResponse, Response

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
from webarena_live.control import models
from webarena_live.control.agent_routes import agent_router, dashboard_files
from webarena_live.control.bodies import ControlError, parse_final_response, parse_json_body
from webarena_live.control.context import (
    Control,
    ControlContext,
    find_task,
    health,
    list_sessions,
    session_in_path,
    task_view,
)
from webarena_live.control.errors import JsonResponse, install_error_handlers, validation_detail
from webarena_live.control.leasing import interference_of, lease_router
from webarena_live.control.middleware import BodyCap, CommonHeaders, Guard, RawPath
from webarena_live.control.models import SessionName
from webarena_live.control.pac import PAC_MEDIA_TYPE, proxy_auto_config
from webarena_live.control.run_view import plotly_script, run_figures
from webarena_live.control.starts import StartHeaders, start_session
from webarena_live.control.streams import Streams, global_stream, session_stream
from webarena_live.evaluator import __version__, trace_to_har
from webarena_live.runs.finish_outcome import FinishRefused, OutputsFailed, no_task_detail
from webarena_live.runs.sessions import Session
from webarena_live.runs.settings import SessionState

_ERRORS = {
    400: "malformed request (not JSON, wrong types, missing or unknown fields)",
    401: "control token missing or wrong",
    403: "the request came from a web page",
    404: "unknown task, session or route",
    405: "method not allowed on this route",
    409: "the session cannot do that now (running, finished, no task, no events, no reset_url); no output "
    "directory, or one holding named runs only (GET /report)",
    413: "request body over 10 MiB",
    502: "a site's reset failed (each site's outcome in the detail); the session did not start",
    503: "no replica is free for the task within `wait` (Retry-After), no proxy address is free for the "
    "session (--session-ports used up), or its worker is restarting",
    507: "the outputs could not be written",
}
_GUARDED = (401, 403, 404, 405, 413)
"""What every route but the public ones can answer."""


def _documented(model: type[Any], *errors: int) -> dict[int | str, dict[str, Any]]:
    responses: dict[int | str, dict[str, Any]] = {200: {"model": model}}
    for status in errors:
        responses[status] = {"model": models.ErrorBody, "description": _ERRORS[status]}
    return responses


def _stream(*errors: int) -> dict[int | str, dict[str, Any]]:
    responses = _documented(models.ErrorBody, *errors)
    responses[200] = {"content": {"text/event-stream": {"schema": {"type": "string"}}}}
    return responses


def _body(schema: dict[str, Any]) -> dict[str, Any]:
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


Since = Annotated[int, Query(description="first event index to return")]
StatusFilter = Annotated[
    list[int] | None,
    Query(
        description="only the events with one of these response statuses (0: no response), e.g. "
        "status=0&status=502: what the rewards read to tell a site that never answered"
    ),
]
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


def create_app(control: ControlContext | None) -> FastAPI:
    app = FastAPI(
        title="webarena-live control API",
        version=__version__,
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
        default_response_class=JsonResponse,
        redirect_slashes=False,
    )
    app.state.control = control
    app.state.streams = Streams()
    install_error_handlers(app)
    for middleware in (Guard, BodyCap, RawPath, CommonHeaders):  # the last added runs first
        app.add_middleware(middleware)

    @app.get(
        "/health",
        summary="liveness, version, tasks loaded, sites mapped",
        responses=_documented(models.Health, 405),
    )
    async def get_health(ctx: Control) -> Response:
        return JsonResponse(health(ctx))

    @app.get("/openapi.json", summary="this document", responses={200: {"description": "this document"}})
    async def get_openapi_document() -> Response:
        return JsonResponse(openapi_document(app))

    @app.get(
        "/tasks", summary="every task, start URLs rendered", responses=_documented(models.TaskList, *_GUARDED)
    )
    async def get_tasks(ctx: Control) -> Response:
        tasks = [task_view(ctx.tasks[task_id], ctx.site_map) for task_id in ctx.tasks]
        return JsonResponse({"count": len(tasks), "tasks": tasks})

    @app.get("/tasks/{task_id}", summary="one task", responses=_documented(models.TaskView, 400, *_GUARDED))
    async def get_task(task_id: int, ctx: Control) -> Response:
        return JsonResponse(task_view(find_task(ctx, task_id), ctx.site_map))

    @app.get(
        "/sessions",
        summary="every session, and resumable runs",
        responses=_documented(models.SessionList, *_GUARDED),
    )
    async def get_sessions(ctx: Control) -> Response:
        return JsonResponse({"sessions": list_sessions(ctx)})

    @app.post(
        "/sessions",
        summary="start (or restart, clearing its trace) a session on a task",
        responses=_documented(models.Started, 400, 409, 502, 503, *_GUARDED),
        openapi_extra=_body({"$ref": "#/components/schemas/StartSession"}),
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
            raise ControlError(400, "bad_request", validation_detail(error.errors())) from None
        client = client or (request.client.host if request.client else None)
        caller = unquote(caller) if caller else None
        headers = StartHeaders(caller=caller, port=port, lease=leased, client=client)
        return JsonResponse(await start_session(ctx, start, headers))

    @app.get(
        "/sessions/{session}",
        summary="state, task, event counts",
        responses=_documented(models.SessionView, *_GUARDED),
    )
    async def get_session(session: SessionName, ctx: Control) -> Response:
        return JsonResponse(session_in_path(ctx, session).describe())

    @app.get(
        "/sessions/{session}/trace",
        summary="events captured so far",
        responses=_documented(models.Trace, 400, *_GUARDED),
    )
    async def get_trace(
        session: SessionName, ctx: Control, since: Since = 0, status: StatusFilter = None
    ) -> Response:
        found = session_in_path(ctx, session)
        events = list(found.events_view(since))
        if status is not None:  # `count` stays the whole trace's
            wanted = set(status)
            events = [event for event in events if event.get("status") in wanted]
        return JsonResponse({"session": found.name, "count": len(found.trace), "events": events})

    @app.get(
        "/sessions/{session}/events",
        summary="Server-Sent Events: the events so far, then each as it is captured, then the verdict",
        responses=_stream(400, *_GUARDED)
        | {204: {"description": "the session is finished and the client has everything (Last-Event-ID)"}},
    )
    async def get_events(
        session: SessionName,
        request: Request,
        ctx: Control,
        since: Since = 0,
        tail: Tail = None,
        last_event_id: Annotated[str | None, Header(include_in_schema=False)] = None,
    ) -> Response:
        found = session_in_path(ctx, session)
        if last_event_id is not None and found.result is not None:
            # A browser's EventSource reconnects whenever a stream ends; after the finish it already has
            # everything, and a 204 is what makes it stop (the HTML standard's "fail the connection").
            return Response(status_code=204, media_type="text/event-stream")
        if last_event_id and last_event_id.strip().isdigit():
            since = max(since, int(last_event_id) + 1)
        return session_stream(
            app.state.streams, ctx.sessions, found, since, snapshot=_via_proxy(request), tail=tail
        )

    @app.get(
        "/events",
        summary="Server-Sent Events: every session's notices (session, event, reset, finished)",
        responses=_stream(*_GUARDED),
    )
    async def get_all_events(request: Request, ctx: Control, events: EventDetail = "each") -> Response:
        each_event = events == "each"
        return global_stream(
            app.state.streams, ctx.sessions, snapshot=_via_proxy(request), each_event=each_event
        )

    @app.post(
        "/sessions/{session}/finish",
        summary="evaluate the agent's final response against the session's trace",
        responses=_documented(models.Result, 400, 409, 507, *_GUARDED),
        openapi_extra=_body({"$ref": "#/components/schemas/FinalResponse"}),
    )
    async def post_finish(session: SessionName, request: Request, ctx: Control) -> Response:
        given = request.headers.get(INTERFERENCE_HEADER)  # a fleet's front names it (control/leasing.py)
        answer = finish(ctx, session_in_path(ctx, session), await request.body(), given)
        if ctx.addresses is not None:
            await ctx.addresses.settle()  # the session's address is closed when the agent hears back
        return answer

    @app.get(
        "/sessions/{session}/har",
        summary="the trace as HAR 1.2",
        responses=_documented(models.Har, *_GUARDED),
    )
    async def get_har(session: SessionName, ctx: Control) -> Response:
        return JsonResponse(trace_to_har(session_in_path(ctx, session).trace))

    @app.get(
        "/sessions/{session}/proxy.pac",
        summary="a proxy auto-config file: the session's traffic to its own address, static assets DIRECT",
        responses={
            200: {"content": {PAC_MEDIA_TYPE: {"schema": {"type": "string"}}}},
            **_documented(models.ErrorBody, 409, *_GUARDED),
        },
    )
    async def get_proxy_pac(session: SessionName, ctx: Control) -> Response:
        found = session_in_path(ctx, session)
        if found.proxy is None:
            detail = (
                f"session {found.name!r} holds no proxy address (start it with POST /sessions; "
                "a finish releases it)"
            )
            raise ControlError(409, "no_address", detail)
        return Response(proxy_auto_config(found.proxy), media_type=PAC_MEDIA_TYPE)

    @app.get(
        "/report",
        summary="the run in figures, as `webarena-live report` gives them on the output directory",
        responses=_documented(models.RunFigures, 400, 409, *_GUARDED),  # 404: an unknown named run
    )
    async def get_report(
        ctx: Control,
        run: Annotated[str | None, Query(description="a named run: OUT/<run>/")] = None,
    ) -> Response:
        return JsonResponse(await run_figures(ctx.output_dir, ctx.tasks, run))

    @app.get("/dashboard/plotly.min.js", include_in_schema=False)
    async def get_plotly() -> Response:
        return FileResponse(plotly_script(), media_type="text/javascript")

    app.include_router(
        agent_router(
            {
                "progress": _documented(models.Progress, 409, *_GUARDED),
                "preview": _documented(models.Result, 400, 409, *_GUARDED),
            }
        )
    )
    app.include_router(
        lease_router(
            {
                "mutations": _documented(models.Mutations, 400, *_GUARDED),
                "abandon": _documented(models.Abandoned, 400, 409, *_GUARDED),
            }
        )
    )
    app.mount("/dashboard", dashboard_files())
    return app


def finish(ctx: ControlContext, session: Session, body: bytes, interference: str | None = None) -> Response:
    """The finish route's work: the session's attempt judges, the answer is its `eval_result.json`.
    `interference`: what a fleet's front carried (`INTERFERENCE_HEADER`)."""
    if session.task is None:  # before reading the body, as any request to a session without a task
        raise ControlError(409, "no_task", no_task_detail(session.name))
    response = parse_final_response(body)
    finished = session.attempt.state is SessionState.FINISHED  # a repeat: no new interference to take
    try:
        with ctx.finish_guard():
            named = None if finished else interference_of(ctx, session, interference)
            outcome = session.finish(response, interference=named)
    except FinishRefused as refused:
        raise ControlError(409, refused.reason, refused.detail_body) from None
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


def openapi_document(app: FastAPI | None = None) -> dict[str, Any]:
    """The generated OpenAPI document, without FastAPI's 422 (validation answers 400 here)."""
    app = app or create_app(None)
    if app.openapi_schema is not None:
        return app.openapi_schema
    document = get_openapi(
        title=app.title,
        version=app.version,
        description="Start sessions, watch their traces, post the agent's final response and get the "
        "verdict. Errors are JSON {error, detail} with a 4xx status and change nothing. With a control "
        "token, every route but /health and /openapi.json needs 'Authorization: Bearer <token>'. Requests "
        "from web pages (Origin / Sec-Fetch-Site headers) are refused.",
        routes=app.routes,
    )
    for operations in document["paths"].values():
        for operation in operations.values():
            operation["responses"].pop("422", None)
            content = operation["responses"]["200"].get("content", {})
            if "text/event-stream" in content:  # a stream answers with events only
                content.pop("application/json", None)
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    for unused in ("HTTPValidationError", "ValidationError"):
        schemas.pop(unused, None)
    schemas["StartSession"] = models.StartSession.model_json_schema(
        ref_template="#/components/schemas/{model}"
    )
    schemas["FinalResponse"] = models.FINAL_RESPONSE_SCHEMA
    document["components"]["securitySchemes"] = {"controlToken": {"type": "http", "scheme": "bearer"}}
    app.openapi_schema = document
    return document
