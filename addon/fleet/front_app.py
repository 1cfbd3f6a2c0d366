"""The control API of `serve --workers N`: one port in front of every worker's.

Each request goes to the worker that owns its session (`fleet/front.py`, through `fleet/link.py`); the
routes that speak of every session (`GET /health`, `GET /sessions`, `GET /events`: `front_events.py`) ask
every worker and answer once.
`POST /sessions` places a new session (`addresses/placement.py`) and tells the worker the port of its
address. While a session's worker is restarting, its routes answer a JSON 503 with `Retry-After`
(docs/architecture.md, Workers).
"""

from __future__ import annotations

import json
import logging
from typing import Any
from urllib.parse import unquote

import httpx
from fastapi import FastAPI, Request
from pydantic import ValidationError
from starlette.responses import Response

from webarena_live.addresses.headers import CALLER_HEADER, CLIENT_HEADER, PROXY_PORT_HEADER, REPEATED_HEADER
from webarena_live.addresses.placement import PlacementError
from webarena_live.control.bodies import ControlError, parse_json_body
from webarena_live.control.errors import JsonResponse, error_response
from webarena_live.control.middleware import MAX_CONTROL_BODY
from webarena_live.control.models import StartSession
from webarena_live.control.streams import Streams
from webarena_live.evaluator import __version__
from webarena_live.fleet import front_events, front_views
from webarena_live.fleet.front import Front
from webarena_live.fleet.link import (
    answer_headers,
    error_of,
    session_of,
    unavailable,
    unresponsive,
)
from webarena_live.fleet.workers import Worker
from webarena_live.replicas.mutations import add_reads
from webarena_live.runs.sessions import DEFAULT_SESSION

logger = logging.getLogger("webarena_live.fleet")

PORT_TRIES = 5
"""Ports tried for a new session's address when its worker finds them busy on its machine."""


def create_front_app(front: Front) -> FastAPI:
    app = FastAPI(title="webarena-live control API", version=__version__, openapi_url=None, docs_url=None,
                  redoc_url=None, default_response_class=JsonResponse, redirect_slashes=False)  # fmt: skip
    app.state.streams = Streams()  # the control server closes the streams it knows of when it stops

    @app.get("/health")
    async def get_health(request: Request) -> Response:
        if not front.ready:  # not logged: this is what a launcher polls while the workers start
            return JsonResponse({"error": "starting", "detail": "the workers are starting"}, status_code=503)
        answer = await front_views.health(front, request)
        if front.leases is not None:
            answer["pool"] = add_reads(front.leases.pool.status(), *front.leases.reads.values())
        return JsonResponse(answer)

    @app.get("/sessions")
    async def get_sessions(request: Request) -> Response:
        listed = await front_views.sessions(front, request)
        if isinstance(listed, Response):
            return listed
        return JsonResponse({"sessions": listed})

    @app.post("/sessions")
    async def post_sessions(request: Request) -> Response:
        body = await _bounded_body(request)
        if isinstance(body, Response):
            return body
        read = _start_of(body)
        if read is None:  # not a start the control API's model accepts: a worker answers the 400
            workers = front.up_workers()
            if not workers:
                return unavailable(front.workers[0], request)
            return await front.link.forward(workers[0], request, body)
        start, document = read
        caller = request.headers.get(CALLER_HEADER)
        name = start.session
        if name is None:  # an explicit name first, else the caller's (through the proxy), else the default
            name = unquote(caller) if caller else DEFAULT_SESSION
        owner = front.placement.owner(name)
        if owner is not None and (refusal := _unavailable(front, front.workers[owner], request)) is not None:
            return refusal
        among = front.workers_near(start.near) if start.near is not None else None
        if owner is None and start.resume_journal:  # after a restart: on a worker that holds its journal
            among = await front_views.journal_holders(front, request, name) or among
        lease: dict[str, str] = {}
        if front.leases is not None:  # the replicas first: a refusal then holds nothing
            try:
                lease, document = await front.leases.before_start(name, start, document)
            except ControlError as error:
                no_lease = error_response(
                    error.status, error.error, error.detail, method="POST", path="/sessions"
                )
                no_lease.headers.update(error.headers)
                return no_lease
        placed = None
        try:  # the one place a start's lease is given back: whatever did not start
            placed = await _place(front, request, name, among, json.dumps(document).encode(), lease)
        finally:
            if not isinstance(placed, tuple) and front.leases is not None:
                front.leases.release(name, "refused")
        if isinstance(placed, Response):
            return placed
        worker, content = placed
        reply = json.loads(content)
        front.sessions.started(name, reply["task_id"], start.run)
        reply["worker"], reply["node"] = worker.index, worker.node
        if among is not None and worker.index not in among:
            reply["near_unmet"] = f"no worker is up on {start.near!r}; placed on the least busy worker"
        return JsonResponse(reply)

    @app.post("/sessions/{session}/finish")
    async def post_finish(session: str, request: Request) -> Response:
        name = unquote(session)
        forwarded = await _forward_ending(front, name, request)
        if isinstance(forwarded, Response):
            return forwarded
        worker, upstream, content = forwarded
        if upstream.status_code == 200 and not upstream.headers.get(REPEATED_HEADER):
            known = front.sessions
            front.placement.release(name)  # the worker closed the session's address; its port is free
            known.starts.pop(name, None)
            if front.leases is not None:
                front.leases.release(name, "finished")
            if known.outputs is not None:  # written on the worker's node: carried here before the answer
                await known.carry_outputs(front.link, worker, name)
            await known.remember_finished(front.link, worker, name)
        return Response(content, upstream.status_code, headers=answer_headers(upstream))

    @app.post("/sessions/{session}/abandon")
    async def post_abandon(session: str, request: Request) -> Response:
        """The worker ends the attempt's lease (it checks the body and the session); then the front
        gathers the workers' mutations and its pool gives the replicas back."""
        name = unquote(session)
        forwarded = await _forward_ending(front, name, request)
        if isinstance(forwarded, Response):
            return forwarded
        _, upstream, content = forwarded
        if upstream.status_code == 200 and front.leases is not None:
            # what its traffic changed first: a replica released as clean would be leased unreset
            await front.leases.gather(front.link.http, front.up_workers(), front.link.auth())
            try:
                reason = json.loads(content).get("reason")
            except (ValueError, AttributeError):
                reason = None
            front.leases.pool.abandon(name, reason if isinstance(reason, str) else None)
        return Response(content, upstream.status_code, headers=answer_headers(upstream))

    @app.get("/sessions/{session}")
    async def get_session(session: str, request: Request) -> Response:
        name = unquote(session)
        worker, known = _owner_of(front, name, request), front.sessions
        if isinstance(worker, Response) and name in known.finished and name not in known.starts:
            if (refusal := await front.link.refusal(request)) is not None:  # the token holds here too
                return refusal
            return JsonResponse(known.finished[name])  # its worker is restarting or silent
        if isinstance(worker, Response):
            return worker
        upstream = await front.link.send(worker, request, b"")
        if isinstance(upstream, Response):
            return upstream
        content = await upstream.aread()
        await upstream.aclose()
        if upstream.status_code == 404 and name in front.sessions.finished:  # its worker restarted since
            view = dict(front.sessions.finished[name])
        elif upstream.status_code != 200:
            return Response(content, upstream.status_code, headers=answer_headers(upstream))
        else:
            view = {**json.loads(content), "worker": worker.index, "node": worker.node}
        if front.sessions.outputs is not None:
            if (carried := front.sessions.carried_files(name)) is not None:
                view["outputs"] = carried
            elif view.get("outputs") and name not in front.sessions.finished:
                view["outputs"] = front.sessions.outputs.local(worker.index, view["outputs"])
        return JsonResponse(view)

    @app.get("/report")
    async def get_report(request: Request, run: str | None = None) -> Response:
        workers = front.up_workers()
        if front.sessions.report is None:  # the workers share the output directory: any of them answers
            if not workers:
                return unavailable(front.workers[0], request)
            return await front.link.forward(workers[0], request)
        refusal = await front.link.refusal(request)
        if refusal is not None:
            return refusal
        try:
            return JsonResponse(await front.sessions.report(run))
        except ControlError as error:
            return error_response(error.status, error.error, error.detail, method="GET", path="/report")

    @app.get("/events")
    async def get_events(request: Request) -> Response:
        return await front_events.merged_events(front, request)

    @app.api_route("/{path:path}", methods=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"])
    async def any_route(path: str, request: Request) -> Response:
        name = session_of(request.url.path)
        if name is None:  # tasks, the dashboard, the OpenAPI document: the same on every worker
            workers = front.up_workers()
            if not workers:
                return unavailable(front.workers[0], request)
            return await front.link.forward(workers[0], request)
        worker = _owner_of(front, name, request)
        if isinstance(worker, Response):
            return worker
        carried: dict[str, str] = {}
        if front.leases is not None and request.method == "POST" and path.endswith("/preview"):
            link = front.link
            carried = await front.leases.interference_header(link.http, link.up_workers(), name, link.auth())
        return await front.link.forward(worker, request, headers=carried)

    return app


def _start_of(body: bytes) -> tuple[StartSession, dict[str, Any]] | None:
    """A `POST /sessions` body read once, by the control API's own model, and the object it came from;
    None when the model refuses it (the worker then answers the 400, as without a front)."""
    try:
        document = parse_json_body(body)
        return StartSession.model_validate(document), document
    except (ControlError, ValidationError):
        return None


async def _place(
    front: Front, request: Request, name: str, among: list[int] | None, body: bytes, lease: dict[str, str]
) -> tuple[Worker, bytes] | Response:
    """Place session `name` and start it on its worker with `body`: the worker and its answer, or the
    refusal to answer (the caller gives the lease back). A port busy on the worker's machine is marked
    so and another tried, `PORT_TRIES` times."""
    refused: Response | None = None
    for _ in range(PORT_TRIES):
        had_port = front.placement.port_of(name) is not None
        try:
            seat = front.placement.place(name, among=among or None)
        except PlacementError as error:
            return error_response(503, "no_address", str(error), method="POST", path="/sessions")
        worker = front.workers[seat.worker]
        headers = {PROXY_PORT_HEADER: str(seat.port), CLIENT_HEADER: _client_of(request), **lease}
        upstream = await front.link.send(worker, request, body, headers)
        if isinstance(upstream, Response):
            if not had_port:
                front.placement.release(name)
            return upstream
        content = await upstream.aread()
        await upstream.aclose()
        if upstream.status_code == 200:
            return worker, content
        if not had_port:
            front.placement.release(name)
        refused = Response(content, upstream.status_code, headers=answer_headers(upstream))
        if upstream.status_code != 503 or had_port or error_of(content) != "no_address":
            return refused
        front.placement.mark_busy(seat.worker, seat.port)
    assert refused is not None
    return refused


async def _forward_ending(
    front: Front, name: str, request: Request
) -> tuple[Worker, httpx.Response, bytes] | Response:
    """A finish or an abandon of session `name` sent to its worker (a finish with the session's
    interference, `INTERFERENCE_HEADER`): the worker, its answer and the answer's body; or the refusal."""
    worker = _owner_of(front, name, request)
    if isinstance(worker, Response):
        return worker
    body = await _bounded_body(request)
    if isinstance(body, Response):
        return body
    carried: dict[str, str] = {}
    if front.leases is not None and request.url.path.endswith("/finish"):
        carried = await front.leases.interference_header(
            front.link.http, front.up_workers(), name, front.link.auth()
        )
    upstream = await front.link.send(worker, request, body, carried)
    if isinstance(upstream, Response):
        return upstream
    content = await upstream.aread()
    await upstream.aclose()
    return worker, upstream, content


def _owner_of(front: Front, name: str, request: Request) -> Worker | Response:
    owner = front.placement.owner(name)
    if owner is None and name in front.sessions.lost:
        lost = front.sessions.lost[name]
        detail = f"session {name!r} is lost: {lost['reason']}; start it again to run it elsewhere"
        return error_response(410, "session_lost", detail, method=request.method, path=request.url.path)
    if owner is None:
        detail = f"no session named {name!r}"
        return error_response(404, "unknown_session", detail, method=request.method, path=request.url.path)
    worker = front.workers[owner]
    return _unavailable(front, worker, request) or worker


def _unavailable(front: Front, worker: Worker, request: Request) -> Response | None:
    """The 503 a route that needs `worker` answers now (restarting, or not answering), or None."""
    if worker.index in front.placement.down or not worker.up:
        return unavailable(worker, request)
    if not worker.responsive:
        return unresponsive(worker, request)
    return None


def _client_of(request: Request) -> str:
    """The address of the client that sent `request` (a session's address lets it in)."""
    return request.client.host if request.client is not None else ""


async def _bounded_body(request: Request) -> bytes | Response:
    """The request's body, or the JSON 413 to answer when it is over the control API's cap."""
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_CONTROL_BODY:
            return error_response(413, "too_large", f"request body over {MAX_CONTROL_BODY} bytes")
        chunks.append(chunk)
    return b"".join(chunks)
