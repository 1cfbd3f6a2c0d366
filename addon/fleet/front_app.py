"""The control API of `serve --workers N`: one port in front of every worker's.

Each request goes to the worker that owns its session (`fleet/front.py`); the routes that speak of
every session (`GET /health`, `GET /sessions`, `GET /events`) ask every worker and answer once.
`POST /sessions` places a new session (`addresses/placement.py`) and tells the worker the port of its
address. While a session's worker is restarting, its routes answer a JSON 503 with `Retry-After`
(docs/architecture.md, Workers).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import unquote

import httpx
from fastapi import FastAPI, Request
from httpx_sse import EventSource
from pydantic import ValidationError
from sse_starlette import EventSourceResponse
from starlette.responses import Response

from webarena_live.addresses.headers import CALLER_HEADER, CLIENT_HEADER, PROXY_PORT_HEADER, REPEATED_HEADER
from webarena_live.addresses.placement import PlacementError
from webarena_live.control.bodies import ControlError, parse_json_body
from webarena_live.control.errors import JsonResponse, error_response
from webarena_live.control.middleware import MAX_CONTROL_BODY
from webarena_live.control.models import StartSession
from webarena_live.control.streams import HEARTBEAT_SECONDS, RETRY_MS, Streams
from webarena_live.evaluator import __version__
from webarena_live.fleet import front_views
from webarena_live.fleet.front import ASK_DEADLINE, Front, answer_headers, error_of, session_of
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
                return front.unavailable(front.pool[0], request)
            return await front.forward(workers[0], request, body)
        start, document = read
        caller = request.headers.get(CALLER_HEADER)
        name = (
            start.session if start.session is not None else (unquote(caller) if caller else DEFAULT_SESSION)
        )
        owner = front.placement.owner(name)
        if owner is not None and (refusal := _unavailable(front, front.pool[owner], request)) is not None:
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
        front.starts[name] = {"task_id": reply["task_id"], "run": start.run}
        for record in (front.lost, front.finished, front.carried):  # an earlier run's are not this run's
            record.pop(name, None)
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
            front.placement.release(name)  # the worker closed the session's address; its port is free
            front.starts.pop(name, None)
            if front.leases is not None:
                front.leases.release(name, "finished")
            if front.outputs is not None:  # written on the worker's node: carried here before the answer
                await front.carry_outputs(worker, name)
            await front.remember_finished(worker, name)
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
            await front.leases.gather(front.http, front.up_workers(), front.auth())
            try:
                reason = json.loads(content).get("reason")
            except (ValueError, AttributeError):
                reason = None
            front.leases.pool.abandon(name, reason if isinstance(reason, str) else None)
        return Response(content, upstream.status_code, headers=answer_headers(upstream))

    @app.get("/sessions/{session}")
    async def get_session(session: str, request: Request) -> Response:
        name = unquote(session)
        worker = _owner_of(front, name, request)
        if isinstance(worker, Response) and name in front.finished and name not in front.starts:
            if (refusal := await front.refusal(request)) is not None:  # the token holds here too
                return refusal
            return JsonResponse(front.finished[name])  # its worker is restarting or silent
        if isinstance(worker, Response):
            return worker
        upstream = await front.send(worker, request, b"")
        if isinstance(upstream, Response):
            return upstream
        content = await upstream.aread()
        await upstream.aclose()
        if upstream.status_code == 404 and name in front.finished:  # its worker restarted since
            view = dict(front.finished[name])
        elif upstream.status_code != 200:
            return Response(content, upstream.status_code, headers=answer_headers(upstream))
        else:
            view = {**json.loads(content), "worker": worker.index, "node": worker.node}
        if front.outputs is not None:
            if (carried := front.carried_files(name)) is not None:
                view["outputs"] = carried
            elif view.get("outputs") and name not in front.finished:
                view["outputs"] = front.outputs.local(worker.index, view["outputs"])
        return JsonResponse(view)

    @app.get("/report")
    async def get_report(request: Request, run: str | None = None) -> Response:
        workers = front.up_workers()
        if front.report is None:  # the workers share the output directory: any of them answers
            if not workers:
                return front.unavailable(front.pool[0], request)
            return await front.forward(workers[0], request)
        refusal = await front.refusal(request)
        if refusal is not None:
            return refusal
        try:
            return JsonResponse(await front.report(run))
        except ControlError as error:
            return error_response(error.status, error.error, error.detail, method="GET", path="/report")

    @app.get("/events")
    async def get_events(request: Request) -> Response:
        return await merged_events(front, request)

    @app.api_route("/{path:path}", methods=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"])
    async def any_route(path: str, request: Request) -> Response:
        name = session_of(request.url.path)
        if name is None:  # tasks, the dashboard, the OpenAPI document: the same on every worker
            workers = front.up_workers()
            if not workers:
                return front.unavailable(front.pool[0], request)
            return await front.forward(workers[0], request)
        worker = _owner_of(front, name, request)
        if isinstance(worker, Response):
            return worker
        carried: dict[str, str] = {}
        if front.leases is not None and request.method == "POST" and path.endswith("/preview"):
            carried = await front.leases.interference_header(
                front.http, front.up_workers(), name, front.auth()
            )
        return await front.forward(worker, request, headers=carried)

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
        worker = front.pool[seat.worker]
        headers = {PROXY_PORT_HEADER: str(seat.port), CLIENT_HEADER: _client_of(request), **lease}
        upstream = await front.send(worker, request, body, headers)
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
        carried = await front.leases.interference_header(front.http, front.up_workers(), name, front.auth())
    upstream = await front.send(worker, request, body, carried)
    if isinstance(upstream, Response):
        return upstream
    content = await upstream.aread()
    await upstream.aclose()
    return worker, upstream, content


def _owner_of(front: Front, name: str, request: Request) -> Worker | Response:
    owner = front.placement.owner(name)
    if owner is None and name in front.lost:
        lost = front.lost[name]
        detail = f"session {name!r} is lost: {lost['reason']}; start it again to run it elsewhere"
        return error_response(410, "session_lost", detail, method=request.method, path=request.url.path)
    if owner is None:
        detail = f"no session named {name!r}"
        return error_response(404, "unknown_session", detail, method=request.method, path=request.url.path)
    worker = front.pool[owner]
    return _unavailable(front, worker, request) or worker


def _unavailable(front: Front, worker: Worker, request: Request) -> Response | None:
    """The 503 a route that needs `worker` answers now (restarting, or not answering), or None."""
    if worker.index in front.placement.down or not worker.up:
        return front.unavailable(worker, request)
    if not worker.responsive:
        return front.unresponsive(worker, request)
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


async def merged_events(front: Front, request: Request) -> Response:
    """`GET /events` of every worker as one stream: one `sessions` opening with every worker's
    sessions, then each worker's notices as they come."""
    workers = front.up_workers()
    upstreams: list[tuple[Worker, httpx.Response]] = []
    for worker in workers:
        upstream = await front.send(worker, request, b"")
        if isinstance(upstream, Response):
            continue  # a worker that does not answer: the stream goes on without it
        if upstream.status_code != 200:
            content = await upstream.aread()
            for _, opened in upstreams:
                await opened.aclose()
            await upstream.aclose()
            return Response(content, upstream.status_code, headers=answer_headers(upstream))
        upstreams.append((worker, upstream))

    async def events() -> AsyncIterator[bytes]:
        queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        front.listeners.add(queue)
        sessions: list[dict[str, Any]] = list(front.lost.values())
        readers = []
        try:
            for worker, upstream in upstreams:
                source = EventSource(upstream).aiter_sse()
                with contextlib.suppress(TimeoutError, httpx.HTTPError):
                    async with asyncio.timeout(ASK_DEADLINE):  # a worker that stalls now: left out
                        async for sse in source:
                            if sse.event == "sessions":
                                views = json.loads(sse.data)["sessions"]
                                where = {"worker": worker.index, "node": worker.node}
                                sessions += [{**view, **where} for view in views]
                                break
                readers.append(asyncio.create_task(_pump(source, queue)))
            opening = {"sessions": sessions}
            yield f"retry: {RETRY_MS}\n\nevent: sessions\ndata: {json.dumps(opening)}\n\n".encode()
            open_readers = len(readers)
            while open_readers:
                item = await queue.get()
                if item is None:
                    open_readers -= 1
                    continue
                yield item
        finally:
            front.listeners.discard(queue)
            for reader in readers:
                reader.cancel()
            for _, upstream in upstreams:
                await upstream.aclose()

    response = EventSourceResponse(
        events(), ping=HEARTBEAT_SECONDS, sep="\n", headers={"Cache-Control": "no-cache"}
    )
    response.headers["Connection"] = "close"
    response.headers["Content-Type"] = "text/event-stream"
    return response


async def _pump(source: AsyncIterator[Any], queue: asyncio.Queue[bytes | None]) -> None:
    """One worker's notices into the merged stream, each as it was written; None when it ends."""
    try:
        async for sse in source:
            head = f"event: {sse.event}\n" if sse.event and sse.event != "message" else ""
            if sse.id:
                head += f"id: {sse.id}\n"
            await queue.put(f"{head}data: {sse.data}\n\n".encode())
    except httpx.HTTPError:
        pass  # the worker went away: its part of the stream ends
    finally:
        await queue.put(None)
