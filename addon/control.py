"""The control API (DESIGN §6) as plain functions: (method, path, body) in, a `Reply` out.

The same routes answer on the reserved host through the proxy and on the
control port, so both front ends only translate HTTP to `handle_request` and
back. A failing request gets a JSON `{"error", "detail"}` body and a 4xx
status, and changes nothing: every check runs before the first change.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

from pydantic import BaseModel, ConfigDict, StrictBool, StrictInt, StrictStr, ValidationError

from webarena_live.addon.control_input import ControlError, parse_final_response, parse_json_body
from webarena_live.addon.guard import PUBLIC_PATHS, page_request_problem, token_problem
from webarena_live.addon.openapi import openapi_document
from webarena_live.addon.outputs import EARLIER_ATTEMPT, write_outputs
from webarena_live.addon.recovery import JournalNotFoundError, find_journal, read_journal, resumable_runs
from webarena_live.addon.sessions import (
    DEFAULT_SESSION,
    Session,
    SessionState,
    SessionStore,
    session_name_problem,
)
from webarena_live.evaluator import __version__
from webarena_live.evaluator.errors import UnknownTaskError, WebArenaLiveError
from webarena_live.evaluator.evaluate import evaluate_task
from webarena_live.evaluator.har import trace_to_har
from webarena_live.evaluator.results import REFERENCE_VERSION
from webarena_live.evaluator.run_dir import run_name_problem
from webarena_live.evaluator.sites import SiteMap
from webarena_live.evaluator.tasks import Task, TaskSet

RESERVED_HOST = "webarena-live.invalid"
"""Requests through the proxy to this host are control requests, never forwarded."""

JSON_TYPE = "application/json"
MAX_CONTROL_BODY = 10 * 1024 * 1024
"""Largest control request body (10 MiB): a final response is small; this only stops abuse."""
EVENT_STREAM_TYPE = "text/event-stream"

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    body: bytes
    content_type: str = JSON_TYPE
    headers: tuple[tuple[str, str], ...] = ()
    stream_session: Session | None = None
    """For the event stream: the session whose further events the front end may keep pushing."""


@dataclass
class ControlContext:
    """What the routes work on: the loaded tasks and site map, the sessions, where outputs go."""

    tasks: TaskSet
    site_map: SiteMap
    sessions: SessionStore
    output_dir: Path | None = None
    token: str | None = None
    """When set, every route but /health and /openapi.json needs `Authorization: Bearer <token>`."""
    redact: bool = False
    """Leave cookies, credentials and passwords out of the written network.har (addon.redact)."""
    extra_health: dict[str, Any] = field(default_factory=dict)
    finish_guard: Callable[[], AbstractContextManager[object]] = nullcontext
    """Wraps every finish; `webarena-live serve` keeps garbage collections out of it (`gc_paused`)."""
    refused_page_requests: int = 0
    """Control requests refused because a web page sent them (shown by /health)."""


class StartSession(BaseModel):
    """Body of `POST /sessions`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    task_id: StrictInt
    session: StrictStr | None = None
    run: StrictStr | None = None
    """The run directory the outputs go to: `OUT/<run>/<task_id>/` (default `OUT/<task_id>/`)."""
    restart: StrictBool = False
    """Discard the events of a session that is running, instead of answering 409."""
    resume_journal: StrictBool = False
    """Start with the events of the session's newest journal for this task (after a proxy restart)."""


def json_reply(status: int, payload: Any, *, headers: tuple[tuple[str, str], ...] = ()) -> Reply:
    # ASCII escapes: captured text may hold lone surrogates (undecodable header bytes).
    body = json.dumps(payload, indent=2).encode("ascii") + b"\n"
    return Reply(status=status, body=body, headers=headers)


def error_reply(error: ControlError) -> Reply:
    return json_reply(error.status, {"error": error.error, "detail": error.detail})


def sse_message(data: Any, *, event: str | None = None, event_id: int | None = None) -> bytes:
    """One Server-Sent Events message; `data` is sent as one line of JSON."""
    lines = []
    if event is not None:
        lines.append(f"event: {event}")
    if event_id is not None:
        lines.append(f"id: {event_id}")
    lines.append(f"data: {json.dumps(data, separators=(',', ':'))}")
    return ("\n".join(lines) + "\n\n").encode("utf-8")


def render_url(site_map: SiteMap, template: str, sites: tuple[str, ...]) -> str:
    """A start URL with real base URLs; placeholders the site map cannot fill stay as they are."""
    try:
        return site_map.render(template, sites=sites, strict=False)
    except WebArenaLiveError:
        return template


def task_view(task: Task, site_map: SiteMap) -> dict[str, Any]:
    """What an agent may see of a task: never the evaluators (they hold the expected answer)."""
    return {
        "task_id": task.task_id,
        "intent_template_id": task.intent_template_id,
        "sites": list(task.sites),
        "intent": task.intent,
        "start_urls": [render_url(site_map, url, task.sites) for url in task.start_urls],
        "revision": task.revision,
    }


def _session(ctx: ControlContext, name: str) -> Session:
    session = ctx.sessions.get(name)
    if session is None:
        raise ControlError(404, "unknown_session", f"no session named {name!r}")
    return session


def _task(ctx: ControlContext, task_id: int) -> Task:
    try:
        return ctx.tasks[task_id]
    except UnknownTaskError as error:
        raise ControlError(404, "unknown_task", str(error)) from None


def _int_param(query: dict[str, list[str]], name: str, default: int = 0) -> int:
    values = query.get(name)
    if not values:
        return default
    try:
        return int(values[-1])
    except ValueError:
        raise ControlError(400, "bad_request", f"query parameter {name!r} must be an integer") from None


def health(ctx: ControlContext) -> Reply:
    return json_reply(
        200,
        {
            "status": "ok",
            "version": __version__,
            "reference_version": REFERENCE_VERSION,
            "tasks": len(ctx.tasks),
            "tasks_source": ctx.tasks.source,
            "sessions": len(ctx.sessions),
            "output_dir": str(ctx.output_dir) if ctx.output_dir else None,
            "journal_dir": str(ctx.sessions.journal_dir) if ctx.sessions.journal_dir else None,
            "refused_page_requests": ctx.refused_page_requests,
            "control_token": bool(ctx.token),
            "redact": ctx.redact,
            "sites": {name: list(urls) for name, urls in ctx.site_map.urls.items()},
            **ctx.extra_health,
        },
    )


def list_tasks(ctx: ControlContext) -> Reply:
    tasks = [task_view(ctx.tasks[task_id], ctx.site_map) for task_id in ctx.tasks]
    return json_reply(200, {"count": len(tasks), "tasks": tasks})


def list_sessions(ctx: ControlContext) -> Reply:
    """The live sessions, then unfinished runs found in the journals (resumable after a restart)."""
    live = [session.describe() for session in ctx.sessions]
    own = {session.journal.path for session in ctx.sessions if session.journal is not None}
    return json_reply(200, {"sessions": live + resumable_runs(ctx.sessions.journal_dir, skip=own)})


def start_session(ctx: ControlContext, body: bytes, *, caller: str | None) -> Reply:
    try:
        request = StartSession.model_validate(parse_json_body(body))
    except ValidationError as error:
        detail = [f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in error.errors()]
        raise ControlError(400, "bad_request", detail) from None
    # An explicit empty name is an error, not a request for the caller's (or the default) session.
    name = request.session if request.session is not None else (caller or DEFAULT_SESSION)
    problem = session_name_problem(name)
    if problem:
        raise ControlError(400, "bad_session_name", problem)
    if request.run is not None and (problem := run_name_problem(request.run)):
        raise ControlError(400, "bad_run_name", problem)
    task = _task(ctx, request.task_id)
    resumed = None
    if request.resume_journal:
        try:  # read before the restart below clears the session: a failure changes nothing
            resumed = read_journal(find_journal(ctx.sessions.journal_dir, name, task.task_id))
        except JournalNotFoundError as error:
            raise ControlError(404, "no_journal", str(error)) from None
        except WebArenaLiveError as error:
            raise ControlError(409, "bad_journal", str(error)) from None
    current = ctx.sessions.get(name)
    busy = current is not None and current.state is SessionState.RUNNING and len(current.trace) > 0
    if current is not None and busy and not request.restart:
        running = current.task.task_id if current.task else None
        message = (
            f"session {name!r} is running task {running} and has {len(current.trace)} events; finish it, "
            'start another session name, or send "restart": true to discard its events'
        )
        raise ControlError(409, "session_running", message)
    session = ctx.sessions.start(name, task, run=request.run)
    run = f" (run {request.run})" if request.run else ""
    logger.info("session %s started: task %d%s: %s", name, task.task_id, run, task.intent)
    if resumed is not None:
        for event in resumed:  # also journals them again, so the new run's journal is complete
            session.append(event)
    view = task_view(task, ctx.site_map)
    reply = {"session": session.name, "state": session.state.value, **{k: view[k] for k in _START_FIELDS}}
    if resumed is not None:
        reply["resumed_events"] = len(resumed)
    return json_reply(200, reply)


_START_FIELDS = ("task_id", "intent", "start_urls", "sites")


def session_trace(session: Session, query: dict[str, list[str]]) -> Reply:
    since = _int_param(query, "since")
    events = list(session.events_view(since))
    return json_reply(200, {"session": session.name, "count": len(session.trace), "events": events})


def session_events(session: Session, query: dict[str, list[str]], *, last_event_id: str | None) -> Reply:
    """The stream's opening: every event so far (from `since`, or after `Last-Event-ID`)."""
    since = _int_param(query, "since")
    if last_event_id is not None and session.result is not None:
        # A browser's EventSource reconnects whenever a stream ends; after the finish it already has
        # everything, and a 204 is what makes it stop (the HTML standard's "fail the connection").
        return Reply(204, b"", content_type=EVENT_STREAM_TYPE)
    if last_event_id and last_event_id.strip().isdigit():
        since = max(since, int(last_event_id) + 1)
    chunks = [b"retry: 1000\n\n", sse_message(session.describe(), event="session")]
    chunks.extend(sse_message(view, event_id=view["index"]) for view in session.events_view(since))
    if session.result is not None:
        chunks.append(sse_message(session.result.to_dict(), event="finished"))
    headers = (("Cache-Control", "no-cache"), ("X-Accel-Buffering", "no"))
    body = b"".join(chunks)
    return Reply(200, body, content_type=EVENT_STREAM_TYPE, headers=headers, stream_session=session)


def finish_session(ctx: ControlContext, session: Session, body: bytes) -> Reply:
    if session.state is SessionState.FINISHED:
        detail = f"session {session.name!r} is finished; POST /sessions to restart it"
        raise ControlError(409, "already_finished", detail)
    task = session.task
    if task is None:
        raise ControlError(
            409, "no_task", f"session {session.name!r} has no task; POST /sessions with a task_id first"
        )
    response = parse_final_response(body)
    trace = session.trace
    if not len(trace):
        # The reference refuses a run without network events (an error verdict nobody can use);
        # saying so lets the harness check its proxy settings and finish again.
        detail = f"no events captured in session {session.name!r}; is the agent's traffic using the proxy?"
        raise ControlError(409, "no_events", detail)
    started = time.perf_counter()
    result = evaluate_task(task, response, trace, site_map=ctx.site_map, data_checksum=ctx.tasks.checksum)
    evaluated = time.perf_counter()
    outputs = None
    if ctx.output_dir is not None:
        spool = session.take_har_spool(redacted=ctx.redact)
        try:
            outputs = write_outputs(
                ctx.output_dir,
                task_id=task.task_id,
                run=session.run,
                raw_response=response,
                trace=trace,
                result=result,
                redact=ctx.redact,
                har_spool=spool,
            )
        except OSError as error:
            raise ControlError(507, "output_failed", f"cannot write outputs: {error}") from None
        finally:
            if spool is not None:
                spool.discard()  # nothing left after a commit; a failed finish falls back to serializing
    session.finish(result, outputs=outputs)
    # Where the agent's wait went (standard Server-Timing, milliseconds); the benchmarks read it.
    total = time.perf_counter() - started
    logger.info(
        "session %s finished: task %d %s, score %g, %d events, %.1f s%s",
        session.name,
        task.task_id,
        result.status.value,
        result.score,
        len(trace),
        time.time() - session.started,
        f"; earlier attempt kept in {outputs[EARLIER_ATTEMPT]}"
        if outputs and EARLIER_ATTEMPT in outputs
        else "",
    )
    timing = f"evaluate;dur={(evaluated - started) * 1000:.3f}, total;dur={total * 1000:.3f}"
    # Percent-encoded: a session name may hold characters a header value cannot.
    headers: tuple[tuple[str, str], ...] = (
        ("X-WebArena-Live-Session", quote(session.name)),
        ("Server-Timing", timing),
    )
    if outputs and EARLIER_ATTEMPT in outputs:  # the body stays eval_result.json, byte for byte
        headers += (("X-WebArena-Live-Earlier-Attempt", quote(outputs[EARLIER_ATTEMPT])),)
    return json_reply(200, result.to_dict(), headers=headers)


def session_har(session: Session) -> Reply:
    return json_reply(200, trace_to_har(session.trace))


_SESSION_ROUTE = re.compile(r"^/sessions/([^/]+)(?:/(trace|events|finish|har))?/?$")
_TASK_ROUTE = re.compile(r"^/tasks/([^/]+)/?$")


def route(
    ctx: ControlContext,
    method: str,
    path: str,
    query: dict[str, list[str]],
    body: bytes,
    *,
    caller: str | None,
    last_event_id: str | None,
) -> Reply:
    """Dispatch one request; raises `ControlError` for anything that is not served."""
    method = method.upper()
    if path in ("/health", "/health/"):
        _allow(method, "GET")
        return health(ctx)
    if path == "/openapi.json":
        _allow(method, "GET")
        return json_reply(200, openapi_document())
    if path in ("/tasks", "/tasks/"):
        _allow(method, "GET")
        return list_tasks(ctx)
    if match := _TASK_ROUTE.match(path):
        _allow(method, "GET")
        text = unquote(match.group(1))
        if not text.lstrip("-").isdigit():
            raise ControlError(400, "bad_request", f"task id must be an integer, got {text!r}")
        return json_reply(200, task_view(_task(ctx, int(text)), ctx.site_map))
    if path in ("/sessions", "/sessions/"):
        if method == "GET":
            return list_sessions(ctx)
        _allow(method, "POST")
        return start_session(ctx, body, caller=caller)
    if match := _SESSION_ROUTE.match(path):
        name, action = unquote(match.group(1)), match.group(2)
        if action == "finish":
            _allow(method, "POST")
            with ctx.finish_guard():
                return finish_session(ctx, _session(ctx, name), body)
        _allow(method, "GET")
        session = _session(ctx, name)
        if action is None:
            return json_reply(200, session.describe())
        if action == "trace":
            return session_trace(session, query)
        if action == "events":
            return session_events(session, query, last_event_id=last_event_id)
        return session_har(session)
    raise ControlError(404, "not_found", f"no route {method} {path}")


def _allow(method: str, allowed: str) -> None:
    if method != allowed:
        raise ControlError(405, "method_not_allowed", f"use {allowed}")


def handle_request(
    ctx: ControlContext,
    method: str,
    target: str,
    body: bytes = b"",
    *,
    caller: str | None = None,
    last_event_id: str | None = None,
    authorization: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> Reply:
    """Serve one control request given its method and request target (path and query).

    `caller` is the session the request came from (proxy credentials), used
    when `POST /sessions` names none; the header values are passed as received.
    `headers` (lower-cased names) are the request's headers, checked for the
    marks of a request a web page started (see `addon.guard`).
    """
    parts = urlsplit(target)
    path = parts.path or "/"
    try:
        public = path.rstrip("/") in PUBLIC_PATHS
        if not public:
            problem = page_request_problem(method, headers or {})
            if problem:
                if ctx is not None:
                    ctx.refused_page_requests += 1
                logger.warning("refused a control request from a web page: %s %s: %s", method, path, problem)
                raise ControlError(403, "page_request_refused", problem)
        if method.upper() == "OPTIONS":  # a CORS preflight: no web origin is ever granted access
            raise ControlError(405, "method_not_allowed", "the control API grants no CORS access")
        problem = None if public or ctx is None else token_problem(ctx.token, authorization)
        if problem:
            raise ControlError(401, "unauthorized", problem)
        if len(body) > MAX_CONTROL_BODY:
            raise ControlError(413, "too_large", f"request body over {MAX_CONTROL_BODY} bytes")
        query = parse_qs(parts.query)
        return route(ctx, method, path, query, body, caller=caller, last_event_id=last_event_id)
    except ControlError as error:
        if error.status != 404 or method.upper() != "GET":  # polling for a session is not news
            logger.info("refused %s %s: %d %s: %s", method, path, error.status, error.error, error.detail)
        return error_reply(error)
    except Exception as error:  # a bug must answer as JSON, not kill the proxy's handler
        logger.exception("control request %s %s failed", method, target)
        return json_reply(500, {"error": "internal_error", "detail": f"{type(error).__name__}: {error}"})
