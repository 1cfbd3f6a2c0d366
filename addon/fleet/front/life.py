"""The front's sessions in one place: a session's start, finish, abandon and loss under `serve --workers`,
each written once (docs/architecture.md, Workers). The routes (`front/app.py`) and the recovery of
workers (`front/recovery.py`) only call `SessionLife`, as `control/starts.py` and `SessionEnds` do in
one process. The front owns every lease (`front/leases.py`; the lease's life: docs/architecture.md,
Leases): it leases before a start goes to a worker and ends the lease at a finish, an abandon or a loss.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import unquote

import httpx
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response

from webarena_live.addresses.headers import CALLER_HEADER, CLIENT_HEADER, PROXY_PORT_HEADER, REPEATED_HEADER
from webarena_live.addresses.placement import PlacementError
from webarena_live.control.bodies import parse_abandon, parse_json_body
from webarena_live.control.errors import (
    BadRequest,
    Conflict,
    ControlError,
    Gone,
    JsonResponse,
    NotFound,
    TooLarge,
    Unavailable,
    WorkerRefusal,
)
from webarena_live.control.middleware import MAX_CONTROL_BODY
from webarena_live.control.models import StartSession
from webarena_live.evaluator import run_name_problem
from webarena_live.fleet.front import overview
from webarena_live.fleet.front.link import answer_headers, error_of, relayed, unavailable, unresponsive
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
        read = _start_of(body)
        if read is None:  # not a start the control API's model accepts: a worker answers the 400
            workers = front.up_workers()
            if not workers:
                raise unavailable(front.workers[0])
            return await front.link.forward(workers[0], request, body)
        start, document = read
        front.link.guard(request)  # before anything is taken (a lease, a reset, a port), as a worker would
        caller = request.headers.get(CALLER_HEADER)
        name = start.session
        if name is None:  # an explicit name first, else the caller's (through the proxy), else the default
            name = unquote(caller) if caller else DEFAULT_SESSION
        if (mistake := _start_mistake(name, start)) is not None:
            raise BadRequest(*mistake)
        owner = front.placement.owner(name)
        if owner is not None:
            _check_up(front, front.workers[owner])
        among = front.workers_near(start.near) if start.near is not None else None
        if owner is None and start.resume_journal:  # after a restart: on a worker that holds its journal
            among = await overview.journal_holders(front, request, name) or among
        # the replicas first: a refusal (raised) then holds nothing
        lease, document = await front.leases.before_start(name, start, document)
        placed = None
        try:  # the one place a start's lease is given back: whatever did not start
            placed = await _place(front, request, name, among, json.dumps(document).encode(), lease)
        finally:
            if placed is None:
                front.leases.end(name, EndReason.REFUSED)
        worker, content = placed
        reply = json.loads(content)
        front.registry.started(name, reply["task_id"], start.run)
        reply["worker"], reply["node"] = worker.index, worker.node
        if among is not None and worker.index not in among:
            reply["near_unmet"] = f"no worker is up on {start.near!r}; placed on the least busy worker"
        return JsonResponse(reply)

    async def finish(self, owner: Owner, request: Request) -> Response:
        """`POST /sessions/{s}/finish`: judged by its worker with the interference the front names; a
        first finish frees the session's port and ends its lease, and its files come here."""
        front, (name, worker) = self.front, owner
        upstream, content = await _forward_ending(front, owner, request)
        if upstream.status_code == 200 and not upstream.headers.get(REPEATED_HEADER):
            known = front.registry
            front.placement.release(name)  # the worker closed the session's address; its port is free
            known.starts.pop(name, None)
            front.leases.end(name, EndReason.FINISHED)
            view = None
            if known.outputs is not None:  # written on the worker's node: carried here before the answer
                view = await known.carry_outputs(front.link, worker, name)
            await known.remember_finished(front.link, worker, name, view)
        return Response(content, upstream.status_code, headers=answer_headers(upstream))

    async def abandon(self, owner: Owner, request: Request) -> Response:
        """`POST /sessions/{s}/abandon`: the front ends the session's lease (what its traffic changed
        gathered first, so a changed replica is reset) and the worker is told before the answer, so its
        address forwards nothing after it."""
        front, name = self.front, owner.name
        front.link.guard(request)
        if name in front.registry.finished and name not in front.registry.starts:
            raise Conflict("already_finished", f"session {name!r} is finished; its lease ended")
        given = parse_abandon(await bounded_body(request))  # as the worker's route (`control/bodies.py`)
        reason = given.reason if given is not None else None
        leases = front.leases
        lease = leases.authority.lease_of(name)
        if lease is None:
            raise Conflict("no_lease", f"session {name!r} holds no lease here")
        if lease.ended is None:
            await leases.gather(front.link, front.up_workers())
            leases.end(name, EndReason.ABANDONED, reason)
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
        start = front.registry.starts.pop(name, {})
        port = front.placement.port_of(name)
        node = worker.node if worker else None
        view = {"session": name, "state": "lost", "reason": reason, "task_id": start.get("task_id"),
                "run": start.get("run"), "worker": owner, "node": node}  # fmt: skip
        front.registry.lost[name] = view
        front.recovery.resume_failures.pop(name, None)
        front.placement.forget(name)
        front.leases.end(name, EndReason.LOST, reason)
        if worker is not None and port is not None:
            front.workers.forget_port(worker.index, port)
        logger.error("webarena-live: session %s is lost: %s", name, reason)
        front.registry.announce("lost", view)


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
) -> tuple[Worker, bytes]:
    """Place session `name` and start it on its worker with `body`: the worker and its answer; raises
    the refusal to answer (the caller gives the lease back). A port busy on the worker's machine is
    marked so and another tried, `PORT_TRIES` times."""
    refused: ControlError | None = None
    for _ in range(PORT_TRIES):
        had_port = front.placement.port_of(name) is not None
        try:
            seat = front.placement.place(name, among=among or None)
        except PlacementError as error:
            raise Unavailable("no_address", str(error)) from None
        worker = front.workers[seat.worker]
        headers = {PROXY_PORT_HEADER: str(seat.port), CLIENT_HEADER: _client_of(request), **lease}
        try:
            upstream = await front.link.send(worker, request, body, headers)
        except WorkerRefusal:
            if not had_port:
                front.placement.release(name)
            raise
        content = await upstream.aread()
        await upstream.aclose()
        if upstream.status_code == 200:
            return worker, content
        if not had_port:
            front.placement.release(name)
        refused = relayed(upstream, content)
        if upstream.status_code != 503 or had_port or error_of(content) != "no_address":
            raise refused
        front.placement.mark_busy(seat.worker, seat.port)
    assert refused is not None
    raise refused


async def _forward_ending(front: Front, owner: Owner, request: Request) -> tuple[httpx.Response, bytes]:
    """A finish or an abandon of a session sent to its worker (a finish with the session's
    interference, `INTERFERENCE_HEADER`): the worker's answer and the answer's body; raises the
    refusal."""
    name, worker = owner
    body = await bounded_body(request)
    carried: dict[str, str] = {}
    if request.url.path.endswith("/finish"):
        carried = await front.leases.interference_header(front.link, front.up_workers(), name)
    upstream = await front.link.send(worker, request, body, carried)
    content = await upstream.aread()
    await upstream.aclose()
    return upstream, content


class Owner(NamedTuple):
    """A session the front knows, and the worker that runs it (up and answering)."""

    name: str
    worker: Worker


def owner_of(front: Front, name: str) -> Worker:
    """The worker of session `name`, up and answering; raises what its routes answer instead: 410 for a
    lost session, 404 for one unknown, 503 while its worker restarts or does not answer."""
    owner = front.placement.owner(name)
    if owner is None and name in front.registry.lost:
        lost = front.registry.lost[name]
        detail = f"session {name!r} is lost: {lost['reason']}; start it again to run it elsewhere"
        raise Gone("session_lost", detail)
    if owner is None:
        raise NotFound("unknown_session", f"no session named {name!r}")
    worker = front.workers[owner]
    _check_up(front, worker)
    return worker


def _check_up(front: Front, worker: Worker) -> None:
    """Raise the 503 a route that needs `worker` answers now (restarting, or not answering)."""
    if worker.index in front.placement.down or not worker.up:
        raise unavailable(worker)
    if not worker.responsive:
        raise unresponsive(worker)


def _client_of(request: Request) -> str:
    """The address of the client that sent `request` (a session's address lets it in)."""
    return request.client.host if request.client is not None else ""


async def bounded_body(request: Request) -> bytes:
    """The request's body; raises the JSON 413 when it is over the control API's cap."""
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_CONTROL_BODY:
            raise TooLarge("too_large", f"request body over {MAX_CONTROL_BODY} bytes")
        chunks.append(chunk)
    return b"".join(chunks)
