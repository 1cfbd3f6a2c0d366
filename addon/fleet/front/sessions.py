"""The front's sessions in one place: a session's start, finish, abandon and loss under `serve --workers`,
each written once (docs/architecture.md, Workers). The routes (`front/app.py`) and the recovery of
workers (`front/recovery.py`) only call `SessionLife`, as `control/starts.py` and `SessionEnds` do in
one process. The front owns every lease (`front/leases.py`): it leases before a start goes to a worker, ends
the lease at a finish, an abandon or a loss through the pool's one function, and tells the worker.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import httpx
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response

from webarena_live.addresses.headers import CALLER_HEADER, CLIENT_HEADER, PROXY_PORT_HEADER, REPEATED_HEADER
from webarena_live.addresses.placement import PlacementError
from webarena_live.control.bodies import ControlError, parse_abandon, parse_json_body
from webarena_live.control.errors import JsonResponse, error_response
from webarena_live.control.middleware import MAX_CONTROL_BODY
from webarena_live.control.models import StartSession
from webarena_live.evaluator import run_name_problem
from webarena_live.fleet.front import views as front_views
from webarena_live.fleet.front.link import answer_headers, error_of, unavailable, unresponsive
from webarena_live.fleet.workers.local import Worker
from webarena_live.replicas import EndReason
from webarena_live.runs.fault_plan import FaultsError, parse_faults
from webarena_live.runs.sessions import DEFAULT_SESSION, session_name_problem

if TYPE_CHECKING:
    from webarena_live.fleet.front.front import Front

logger = logging.getLogger("webarena_live.fleet")

PORT_TRIES = 5
"""Ports tried for a new session's address when its worker finds them busy on its machine."""


class SessionLife:
    """Start, finish, abandon and loss of the front's sessions."""

    def __init__(self, front: Front) -> None:
        self.front = front

    async def start(self, request: Request) -> Response:
        """`POST /sessions`: lease (a resumed session's own lease back, as it was), place, start on the
        worker; the lease given back when the start does not go on."""
        front = self.front
        body = await bounded_body(request)
        if isinstance(body, Response):
            return body
        read = _start_of(body)
        if read is None:  # not a start the control API's model accepts: a worker answers the 400
            workers = front.up_workers()
            if not workers:
                return unavailable(front.workers[0], request)
            return await front.link.forward(workers[0], request, body)
        start, document = read
        # refused before anything is taken (a lease, a reset, a port), as a worker would refuse it
        if (refusal := await front.link.refusal(request)) is not None:
            return refusal
        caller = request.headers.get(CALLER_HEADER)
        name = start.session
        if name is None:  # an explicit name first, else the caller's (through the proxy), else the default
            name = unquote(caller) if caller else DEFAULT_SESSION
        if (mistake := _start_mistake(name, start)) is not None:
            return error_response(400, *mistake, method="POST", path="/sessions")
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
                front.leases.pool.end_lease(name, EndReason.REFUSED)
        if isinstance(placed, Response):
            return placed
        worker, content = placed
        reply = json.loads(content)
        front.sessions.started(name, reply["task_id"], start.run)
        reply["worker"], reply["node"] = worker.index, worker.node
        if among is not None and worker.index not in among:
            reply["near_unmet"] = f"no worker is up on {start.near!r}; placed on the least busy worker"
        return JsonResponse(reply)

    async def finish(self, name: str, request: Request) -> Response:
        """`POST /sessions/{s}/finish`: judged by its worker with the interference the front names; a
        first finish frees the session's port and ends its lease, and its files come here."""
        front = self.front
        forwarded = await _forward_ending(front, name, request)
        if isinstance(forwarded, Response):
            return forwarded
        worker, upstream, content = forwarded
        if upstream.status_code == 200 and not upstream.headers.get(REPEATED_HEADER):
            known = front.sessions
            front.placement.release(name)  # the worker closed the session's address; its port is free
            known.starts.pop(name, None)
            if front.leases is not None:
                front.leases.pool.end_lease(name, EndReason.FINISHED)
            if known.outputs is not None:  # written on the worker's node: carried here before the answer
                await known.carry_outputs(front.link, worker, name)
            await known.remember_finished(front.link, worker, name)
        return Response(content, upstream.status_code, headers=answer_headers(upstream))

    async def abandon(self, name: str, request: Request) -> Response:
        """`POST /sessions/{s}/abandon`: without a pool here, the worker ends its session's lease;
        with one, the front ends it (what its traffic changed gathered first, so a changed replica is
        reset) and the worker is told before the answer, so its address forwards nothing after it."""
        front = self.front
        if front.leases is None:
            forwarded = await _forward_ending(front, name, request)
            if isinstance(forwarded, Response):
                return forwarded
            _, upstream, content = forwarded
            return Response(content, upstream.status_code, headers=answer_headers(upstream))
        worker = owner_of(front, name, request)
        if isinstance(worker, Response):
            return worker
        if (refusal := await front.link.refusal(request)) is not None:
            return refusal
        if name in front.sessions.finished and name not in front.sessions.starts:
            detail = f"session {name!r} is finished; its lease ended"
            return error_response(409, "already_finished", detail, method="POST", path=request.url.path)
        body = await bounded_body(request)
        if isinstance(body, Response):
            return body
        try:
            given = parse_abandon(body)  # as the worker's route reads it (`control/bodies.py`)
        except ControlError as refused:
            path = request.url.path
            return error_response(refused.status, refused.error, refused.detail, method="POST", path=path)
        reason = given.reason if given is not None else None
        leases = front.leases
        lease = leases.pool.leases.get(name) or leases.pool.ended.get(name)
        if lease is None:
            detail = f"session {name!r} holds no lease here"
            return error_response(409, "no_lease", detail, method="POST", path=request.url.path)
        if lease.ended is None:
            await leases.gather(front.link, front.up_workers())
            leases.pool.end_lease(name, EndReason.ABANDONED, reason)
            if (telling := leases.telling.get(name)) is not None:
                await telling  # the worker refuses the session's traffic before the answer
        return JsonResponse({"session": name, "lease_ended": lease.ended, "reason": lease.ended_detail,
                             "replicas": dict(lease.replicas)})  # fmt: skip

    def lost(self, name: str, reason: str) -> None:
        """Session `name` cannot go on: reported `lost` with `reason`, its name and port freed, its
        lease ended (`lost`)."""
        front = self.front
        owner = front.placement.owner(name)
        worker = front.workers[owner] if owner is not None else None
        start = front.sessions.starts.pop(name, {})
        port = front.placement.port_of(name)
        node = worker.node if worker else None
        view = {"session": name, "state": "lost", "reason": reason, "task_id": start.get("task_id"),
                "run": start.get("run"), "worker": owner, "node": node}  # fmt: skip
        front.sessions.lost[name] = view
        front.recovery.resume_failures.pop(name, None)
        front.placement.forget(name)
        if front.leases is not None:
            front.leases.pool.end_lease(name, EndReason.LOST, reason)
        if worker is not None and port is not None:
            front.workers.forget_port(worker.index, port)
        logger.error("webarena-live: session %s is lost: %s", name, reason)
        front.sessions.announce("lost", view)


def _start_mistake(name: str, start: StartSession) -> tuple[str, str] | None:
    """The 400 a worker would answer a start with (its error and detail), told before the front takes a
    lease or a port for it: a bad session or run name, a mistaken fault plan."""
    if problem := session_name_problem(name):
        return "bad_session_name", problem
    if start.run is not None and (problem := run_name_problem(start.run)):
        return "bad_run_name", problem
    if start.faults is not None:
        try:
            parse_faults(start.faults, source="faults")
        except FaultsError as error:
            return "bad_faults", str(error)
    return None


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
    worker = owner_of(front, name, request)
    if isinstance(worker, Response):
        return worker
    body = await bounded_body(request)
    if isinstance(body, Response):
        return body
    carried: dict[str, str] = {}
    if front.leases is not None and request.url.path.endswith("/finish"):
        carried = await front.leases.interference_header(front.link, front.up_workers(), name)
    upstream = await front.link.send(worker, request, body, carried)
    if isinstance(upstream, Response):
        return upstream
    content = await upstream.aread()
    await upstream.aclose()
    return worker, upstream, content


def owner_of(front: Front, name: str, request: Request) -> Worker | Response:
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


async def bounded_body(request: Request) -> bytes | Response:
    """The request's body, or the JSON 413 to answer when it is over the control API's cap."""
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_CONTROL_BODY:
            return error_response(413, "too_large", f"request body over {MAX_CONTROL_BODY} bytes")
        chunks.append(chunk)
    return b"".join(chunks)
