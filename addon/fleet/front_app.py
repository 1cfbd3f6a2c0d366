"""The control API of `serve --workers N`: one port in front of every worker's.

Each request goes to the worker that owns its session (`fleet/front.py`); the routes that speak of
every session (`GET /health`, `GET /sessions`, `GET /events`) ask every worker and answer once.
`POST /sessions` places a new session (`addresses/placement.py`) and tells the worker the port of its
address. While a session's worker is restarting, its routes answer a JSON 503 with `Retry-After`
(docs/architecture.md, Workers).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import unquote

import httpx
from fastapi import FastAPI, Request
from httpx_sse import EventSource
from sse_starlette import EventSourceResponse
from starlette.responses import Response

from webarena_live.addresses.placement import PlacementError
from webarena_live.control.app import CALLER_HEADER, PROXY_PORT_HEADER
from webarena_live.control.bodies import ControlError
from webarena_live.control.errors import JsonResponse, error_response
from webarena_live.control.middleware import MAX_CONTROL_BODY
from webarena_live.control.streams import HEARTBEAT_SECONDS, RETRY_MS, Streams
from webarena_live.evaluator import __version__
from webarena_live.fleet.front import Front, answer_headers
from webarena_live.fleet.workers import Worker

logger = logging.getLogger("webarena_live.fleet")


def _session_of(path: str) -> str | None:
    """The session a path names (`/sessions/{name}/...`), decoded; None for other routes."""
    parts = path.split("/")
    if len(parts) >= 3 and parts[1] == "sessions" and parts[2]:
        return unquote(parts[2])
    return None


def _started(body: bytes, caller: str | None) -> tuple[str, str | None] | None:
    """The session a `POST /sessions` body starts, as the worker will read it, and the node it asks
    to be `near`; None when the body is not an object (the worker then answers the 400)."""
    try:
        document = json.loads(body)
    except ValueError:
        return None
    if not isinstance(document, dict):
        return None
    name, near = document.get("session"), document.get("near")
    if name is None:
        name = unquote(caller) if caller else "default"
    if not isinstance(name, str) or (near is not None and not isinstance(near, str)):
        return None
    return name, near


def create_front_app(front: Front) -> FastAPI:
    app = FastAPI(title="webarena-live control API", version=__version__, openapi_url=None, docs_url=None,
                  redoc_url=None, default_response_class=JsonResponse, redirect_slashes=False)  # fmt: skip
    app.state.streams = Streams()  # the control server closes the streams it knows of when it stops

    @app.get("/health")
    async def get_health(request: Request) -> Response:
        if not front.ready:  # not logged: this is what a launcher polls while the workers start
            return JsonResponse({"error": "starting", "detail": "the workers are starting"}, status_code=503)
        replies = await front.ask_all(request, "/health")
        if isinstance(replies, Response):
            return replies
        healths = {worker.index: reply.json() for worker, reply in replies}
        first = next(iter(healths.values()), {"status": "restarting", "version": __version__})
        workers = [
            {
                "index": worker.index,
                "pid": worker.pid,
                "state": "lost" if worker.node_lost
                else "up" if worker.index in healths and worker.index not in front.placement.down
                else "restarting",
                "node": worker.node,
                "host": worker.host,
                "actor": worker.actor,
                "proxy_port": worker.ports.proxy,
                "session_port": worker.ports.session,
                "control_port": worker.ports.control,
                "session_ports": sorted(
                    port for name, port in front.placement.held_ports().items()
                    if front.placement.owner(name) == worker.index
                ),
                "sessions": healths.get(worker.index, {}).get("sessions", 0),
                "running": len(front.placement.running_on(worker.index)),
                "restarts": worker.restarts,
            }
            for worker in front.pool
        ]  # fmt: skip
        answer = {**first, "sessions": sum(w["sessions"] for w in workers), "workers": workers}
        if front.leases is not None:
            answer["pool"] = front.leases.pool.status()
        answer.update(front.listening)
        for own in ("memory", "web_port"):  # a worker's own; each worker answers them on its port
            answer.pop(own, None)
        if front.outputs is not None:  # the workers write on their nodes; the files are carried here
            answer["output_dir"], answer["journal_dir"] = str(front.outputs.output_dir), None
        return JsonResponse(answer)

    @app.get("/sessions")
    async def get_sessions(request: Request) -> Response:
        replies = await front.ask_all(request, "/sessions")
        if isinstance(replies, Response):
            return replies
        live: list[dict[str, Any]] = []
        resumable: dict[str, dict[str, Any]] = {}
        for worker, reply in replies:
            for view in reply.json()["sessions"]:
                if view.get("state") == "resumable":
                    resumable[view["journal"]] = view
                else:
                    live.append({**view, "worker": worker.index, "node": worker.node})
        journals = {view.get("journal") for view in live}
        seen = {view["session"] for view in live}
        for name in front.placement.held_ports():  # the sessions of a worker that is restarting
            if name not in seen and name in front.starts:
                owner = front.placement.owner(name)
                live.append({"session": name, "state": "running", "worker": owner, "worker_restarting": True,
                             "task_id": front.starts[name]["task_id"]})  # fmt: skip
        rest = [
            view for path, view in resumable.items() if path not in journals and view["session"] not in seen
        ]
        lost = [view for name, view in front.lost.items() if name not in seen]
        return JsonResponse({"sessions": live + rest + lost})

    @app.post("/sessions")
    async def post_sessions(request: Request) -> Response:
        body = await _bounded_body(request)
        if body is None:
            return error_response(413, "too_large", f"request body over {MAX_CONTROL_BODY} bytes")
        started = _started(body, request.headers.get(CALLER_HEADER))
        if started is None:
            workers = front.up_workers()
            if not workers:
                return front.unavailable(front.pool[0], request)
            return await front.forward(workers[0], request, body)
        name, near = started
        owner = front.placement.owner(name)
        if owner is not None and owner in front.placement.down:
            return front.unavailable(front.pool[owner], request)
        had_port = name in front.placement.held_ports()
        among = front.workers_near(near) if near is not None else None
        try:
            seat = front.placement.place(name, among=among or None)
        except PlacementError as error:
            return error_response(503, "no_address", str(error), method="POST", path="/sessions")
        worker = front.pool[seat.worker]
        extra = {PROXY_PORT_HEADER: str(seat.port)}
        if front.leases is not None:  # the replicas first: a refusal then holds nothing
            try:
                leased, body = await front.leases.before_start(name, json.loads(body))
            except ControlError as error:
                if not had_port:
                    front.placement.release(name)
                refused = error_response(
                    error.status, error.error, error.detail, method="POST", path="/sessions"
                )
                refused.headers.update(error.headers)
                return refused
            extra.update(leased)
        upstream = await front.send(worker, request, body, extra)
        if upstream is None or upstream.status_code != 200:
            if not had_port:
                front.placement.release(name)
            if front.leases is not None:
                front.leases.release(name, "refused")
            if upstream is None:
                return front.unavailable(worker, request)
        content = await upstream.aread()
        await upstream.aclose()
        if upstream.status_code != 200:
            return Response(content, upstream.status_code, headers=answer_headers(upstream))
        reply = json.loads(content)
        front.starts[name] = {"task_id": reply["task_id"], "run": json.loads(body).get("run")}
        front.lost.pop(name, None)
        front.carried.pop(name, None)  # an earlier run's files are not this run's
        reply["worker"], reply["node"] = worker.index, worker.node
        if among is not None and seat.worker not in among:
            reply["near_unmet"] = f"no worker is up on {near!r}; placed on the least busy worker"
        return JsonResponse(reply)

    @app.post("/sessions/{session}/finish")
    async def post_finish(session: str, request: Request) -> Response:
        name = unquote(session)
        worker = _owner_of(front, name, request)
        if isinstance(worker, Response):
            return worker
        body = await _bounded_body(request)
        if body is None:
            return error_response(413, "too_large", f"request body over {MAX_CONTROL_BODY} bytes")
        if front.leases is not None:
            await front.leases.hand_interference(front.http, front.up_workers(), worker, name, front.auth())
        upstream = await front.send(worker, request, body)
        if upstream is None:
            return front.unavailable(worker, request)
        content = await upstream.aread()
        await upstream.aclose()
        if upstream.status_code != 200:
            return Response(content, upstream.status_code, headers=answer_headers(upstream))
        front.placement.release(name)  # the worker closed the session's address; its port is free
        front.starts.pop(name, None)
        if front.leases is not None:
            front.leases.release(name, "finished")
        if front.outputs is not None:  # written on the worker's node: carried here before the answer
            await front.carry_outputs(worker, name)
        return Response(content, upstream.status_code, headers=answer_headers(upstream))

    @app.get("/sessions/{session}")
    async def get_session(session: str, request: Request) -> Response:
        worker = _owner_of(front, unquote(session), request)
        if isinstance(worker, Response):
            return worker
        upstream = await front.send(worker, request, b"")
        if upstream is None:
            return front.unavailable(worker, request)
        content = await upstream.aread()
        await upstream.aclose()
        if upstream.status_code != 200 or front.outputs is None:
            return Response(content, upstream.status_code, headers=answer_headers(upstream))
        view = json.loads(content)
        name = unquote(session)
        if (carried := front.carried_files(name)) is not None:
            view["outputs"] = carried
        elif view.get("outputs"):
            view["outputs"] = front.outputs.local(worker.index, view["outputs"])
        return JsonResponse({**view, "worker": worker.index, "node": worker.node})

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
        name = _session_of(request.url.path)
        if name is None:  # tasks, the dashboard, the OpenAPI document: the same on every worker
            workers = front.up_workers()
            if not workers:
                return front.unavailable(front.pool[0], request)
            return await front.forward(workers[0], request)
        worker = _owner_of(front, name, request)
        if isinstance(worker, Response):
            return worker
        if front.leases is not None and request.method == "POST" and path.endswith("/preview"):
            await front.leases.hand_interference(front.http, front.up_workers(), worker, name, front.auth())
        return await front.forward(worker, request)

    return app


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
    if owner in front.placement.down or not worker.up:
        return front.unavailable(worker, request)
    return worker


async def _bounded_body(request: Request) -> bytes | None:
    """The request's body, or None when it is over the control API's cap."""
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_CONTROL_BODY:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


async def merged_events(front: Front, request: Request) -> Response:
    """`GET /events` of every worker as one stream: one `sessions` opening with every worker's
    sessions, then each worker's notices as they come."""
    workers = front.up_workers()
    upstreams: list[tuple[Worker, httpx.Response]] = []
    for worker in workers:
        upstream = await front.send(worker, request, b"")
        if upstream is None:
            continue
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
                async for sse in source:
                    if sse.event == "sessions":
                        views = json.loads(sse.data)["sessions"]
                        sessions += [{**view, "worker": worker.index, "node": worker.node} for view in views]
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
