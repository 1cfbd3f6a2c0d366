"""The front's way to its workers: every call the front makes to a worker is a `WorkerLink` method, each
with a deadline, given up at once when the worker stops answering; the JSON refusals a client gets
instead are raised (`WorkerRefusal`, `Relayed`: control/errors.py) and rendered by the front's error
handler (docs/architecture.md, Workers).

A request goes to the worker that owns its session with its headers as the client sent them (the worker
checks the token and the page guard, as it does on its own port), but for the headers only the front
sets (`addresses/headers.py`: `FRONT_SET`), which a client's copy never passes.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, unquote

import httpx
from pydantic import ValidationError
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from webarena_live.addresses.headers import FRONT_SET
from webarena_live.addresses.placement import Placement
from webarena_live.control.errors import Relayed, WorkerRefusal
from webarena_live.control.guard import refusal
from webarena_live.control.wire import LeaseEnd, Mutations
from webarena_live.fleet.workers.local import Worker, Workers

logger = logging.getLogger("webarena_live.fleet")

_HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "content-length"}
)
RETRY_AFTER_SECONDS = 1
CONNECT_DEADLINE = 5.0
CALL_DEADLINE = 30.0
"""Seconds a forwarded request may wait for the worker's next byte (its answer, or the next part of
a stream: event streams send a heartbeat every 15 s) before the front answers 504 naming it."""
ASK_DEADLINE = 5.0
"""Seconds each worker has to answer a question the front asks all of them (`GET /sessions`)."""
TELL_TRIES = 5
"""Times the front tells a worker a lease ended before it gives up (the worker is gone: its session is
lost anyway); `TELL_PAUSE` seconds apart."""
TELL_PAUSE = 1.0
HEALTH_DEADLINE = 3.0
"""Seconds each worker has to answer `/health`: one that does not is listed `unresponsive`."""


class WorkerLink:
    """The front's client of its workers: its credentials, the calls, the refusals. `starts` are the
    running sessions (`SessionRegistry.starts`): a worker that answers 404 for one it owns is still
    resuming it."""

    def __init__(
        self,
        workers: Workers,
        placement: Placement,
        starts: Mapping[str, Any],
        *,
        token: str | None,
        worker_token: str | None = None,
    ) -> None:
        self.workers, self.placement, self.starts = workers, placement, starts
        self.http = httpx.AsyncClient(timeout=httpx.Timeout(CALL_DEADLINE, connect=CONNECT_DEADLINE))
        self.token = token
        """The control token, for the front's own calls (resuming sessions on a restarted worker)."""
        self.worker_token = worker_token
        """The workers' token when it is not the operator's (`--ray` with no control token: the
        workers listen on their nodes' addresses, so the front makes one and adds it to what it sends)."""

    def up_workers(self) -> list[Worker]:
        """The workers that are up and answer."""
        return [w for w in self.workers if w.up and w.responsive and w.index not in self.placement.down]

    def resuming(self, worker: Worker, name: str) -> bool:
        """Whether `name` is a running session of `worker` that the worker does not know (yet): a worker
        that died and came back answers on its kept port before it has resumed its sessions."""
        return name in self.starts and self.placement.owner(name) == worker.index

    def auth(self) -> dict[str, str]:
        """The front's own credentials for its calls to the workers."""
        token = self.token or self.worker_token
        return {"Authorization": f"Bearer {token}"} if token else {}

    def passed_auth(self) -> dict[str, str]:
        """What a client's request forwarded to a worker gets added: the workers' own token when the
        operator set none (with one, the client's own goes through and the worker checks it)."""
        return self.auth() if self.token is None else {}

    def guard(self, request: Request) -> None:
        """Raise the refusal of `request`'s credentials (page guard, token) on a route the front answers
        itself, by the workers' own rules (`control/guard.py`); nothing when they would be accepted."""
        headers = {name.lower(): value for name, value in request.headers.items()}
        if (refused := refusal(request.method, request.url.path, headers, lambda: self.token)) is not None:
            raise refused

    async def forward(
        self,
        worker: Worker,
        request: Request,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> Response:
        """The worker's answer to `request`, streamed back as it comes."""
        upstream = await self.send(worker, request, body, headers)
        return StreamingResponse(
            upstream.aiter_raw(),
            status_code=upstream.status_code,
            headers=answer_headers(upstream),
            background=BackgroundTask(upstream.aclose),
        )

    async def send(
        self, worker: Worker, request: Request, body: bytes | None, headers: dict[str, str] | None = None
    ) -> httpx.Response:
        """The worker's answer to `request` (its body not read yet); raises the refusal the client gets
        instead: 503 when the worker is gone or stops answering meanwhile, 504 past `CALL_DEADLINE`."""
        raw_path = request.scope.get("raw_path") or request.url.path.encode()
        query = request.url.query
        url = f"{worker.control_url}{raw_path.decode('latin-1')}" + (f"?{query}" if query else "")
        headers = {**self.passed_auth(), **(headers or {})}
        ours = _HOP_BY_HOP | {name.lower() for name in headers or {}} | FRONT_SET  # never the client's
        sent = [(k, v) for k, v in request.headers.raw if k.decode("latin-1").lower() not in ours]
        sent += [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
        content = body if body is not None else await request.body()
        outgoing = self.http.build_request(request.method, url, headers=sent, content=content)
        sending = asyncio.ensure_future(self.http.send(outgoing, stream=True))
        stalled = asyncio.ensure_future(worker.stalled.wait())
        try:
            await asyncio.wait({sending, stalled}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stalled.cancel()
        if not sending.done():  # it stopped answering meanwhile (fleet/front/liveness.py): no more waiting
            sending.cancel()
            raise unresponsive(worker)
        try:
            answer = sending.result()
        except httpx.TimeoutException:
            raise timed_out(worker) from None
        except httpx.TransportError:
            raise unavailable(worker) from None
        name = session_of(request.url.path)
        if answer.status_code == 404 and name is not None and self.resuming(worker, name):
            await answer.aclose()  # a new worker process took the kept port before its sessions came back
            raise unavailable(worker)
        return answer

    async def health(self, worker: Worker, deadline: float) -> dict[str, Any] | None:
        """The worker's `GET /health` (public: no credentials), None unless it answers 200 within
        `deadline` (what `/health` of the fleet lists, and the probes of `front/liveness.py`)."""
        try:
            reply = await self.http.get(f"{worker.control_url}/health", timeout=deadline)
        except httpx.HTTPError:
            return None
        if reply.status_code != 200:
            return None
        found: dict[str, Any] = reply.json()
        return found

    async def session_view(self, worker: Worker, name: str, *, quiet: bool = True) -> dict[str, Any] | None:
        """The worker's `GET /sessions/{name}`, None unless it answers 200 (`quiet`: nor when the call
        fails; else its `httpx.HTTPError` is raised)."""
        url = f"{worker.control_url}/sessions/{quote(name, safe='')}"
        try:
            reply = await self.http.get(url, headers=self.auth(), timeout=ASK_DEADLINE)
        except httpx.HTTPError:
            if quiet:
                return None
            raise
        if reply.status_code != 200:
            return None
        view: dict[str, Any] = reply.json()
        return view

    async def start_on(
        self, worker: Worker, body: dict[str, Any], headers: dict[str, str], deadline: float
    ) -> httpx.Response:
        """The front's own `POST /sessions` to `worker` (resuming a session on a restarted worker), with
        its credentials; raises `httpx.HTTPError` when the worker does not answer within `deadline`."""
        url, headers = f"{worker.control_url}/sessions", {**headers, **self.auth()}
        return await self.http.post(url, json=body, headers=headers, timeout=deadline)

    async def close(self) -> None:
        await self.http.aclose()

    async def ask_mutations(self, worker: Worker, params: dict[str, Any]) -> Mutations | None:
        """The worker's `GET /mutations` (`params`: `after`, `active_after`) as its route declares it;
        None when it does not answer within `ASK_DEADLINE`, or answers something else."""
        try:
            reply = await self.http.get(
                f"{worker.control_url}/mutations", params=params, headers=self.auth(), timeout=ASK_DEADLINE
            )
            if reply.status_code != 200:
                return None
            return Mutations.model_validate_json(reply.content)
        except (httpx.HTTPError, ValidationError):
            return None

    async def tell_lease_end(self, worker: Worker, name: str, end: LeaseEnd) -> bool:
        """Tell the session's worker its lease ended (`PUT /sessions/{s}/lease_ended`), so its proxy
        forwards nothing more for it; tried `TELL_TRIES` times within `ASK_DEADLINE` each. Whether the
        worker heard it (a 404: the session is gone there, nothing to end)."""
        url = f"{worker.control_url}/sessions/{quote(name, safe='')}/lease_ended"
        body = end.model_dump(exclude_none=True)
        for tried in range(1, TELL_TRIES + 1):
            try:
                reply = await self.http.put(url, json=body, headers=self.auth(), timeout=ASK_DEADLINE)
                if reply.status_code < 500:
                    return True
            except httpx.HTTPError:
                pass
            if tried < TELL_TRIES:
                await asyncio.sleep(TELL_PAUSE)
        logger.error("webarena-live: worker %d was not told session %s's lease ended", worker.index, name)
        return False

    async def ask_all(
        self, request: Request, path: str, *, deadline: float = ASK_DEADLINE
    ) -> list[tuple[Worker, httpx.Response | None]]:
        """Every answering worker's reply to `GET path` with the client's headers (None from one that
        did not answer within `deadline`); raises the first refusal (`Relayed`)."""
        workers = self.up_workers()
        replies = await asyncio.gather(*(self._get(worker, request, path, deadline) for worker in workers))
        for reply in replies:
            if reply is not None and reply.status_code != 200:
                raise relayed(reply, reply.content)
        return list(zip(workers, replies, strict=True))

    async def _get(
        self, worker: Worker, request: Request, path: str, deadline: float
    ) -> httpx.Response | None:
        ours = _HOP_BY_HOP | {name.lower() for name in self.passed_auth()}
        headers = [(k, v) for k, v in request.headers.raw if k.decode("latin-1").lower() not in ours]
        headers += [(k.encode(), v.encode()) for k, v in self.passed_auth().items()]
        try:
            return await self.http.get(f"{worker.control_url}{path}", headers=headers, timeout=deadline)
        except httpx.HTTPError:
            return None


def unavailable(worker: Worker) -> WorkerRefusal:
    detail = (
        f"worker {worker.index} is restarting; its sessions resume from their journals at the same "
        f"proxy addresses: retry in a moment"
    )
    return refused(503, "worker_unavailable", detail, worker)


def unresponsive(worker: Worker) -> WorkerRefusal:
    detail = (
        f"worker {worker.index} (pid {worker.pid}) does not answer; its sessions are kept and "
        "go on when it answers again: retry in a moment"
    )
    return refused(503, "worker_unresponsive", detail, worker)


def timed_out(worker: Worker) -> WorkerRefusal:
    detail = f"worker {worker.index} did not answer within {CALL_DEADLINE:.0f}s"
    return refused(504, "worker_timeout", detail, worker)


def refused(status: int, error: str, detail: str, worker: Worker) -> WorkerRefusal:
    """A JSON refusal naming the worker (`worker`, `node`), with `Retry-After`."""
    return WorkerRefusal(
        status, error, detail, worker=worker.index, node=worker.node, retry_after=RETRY_AFTER_SECONDS
    )


def relayed(upstream: httpx.Response, content: bytes) -> Relayed:
    """A worker's refusal (`upstream`, its body `content` read), to pass on to the client as it came."""
    return Relayed(upstream.status_code, content, answer_headers(upstream))


def answer_headers(upstream: httpx.Response) -> dict[str, str]:
    return {k: v for k, v in upstream.headers.items() if k.lower() not in _HOP_BY_HOP}


def error_of(content: bytes) -> str | None:
    """The `error` of a JSON refusal's body, or None."""
    try:
        found = json.loads(content)
    except ValueError:
        return None
    error = found.get("error") if isinstance(found, dict) else None
    return error if isinstance(error, str) else None


def session_of(path: str) -> str | None:
    """The session a control path names (`/sessions/{name}/...`), decoded; None for other routes."""
    parts = path.split("/")
    if len(parts) >= 3 and parts[1] == "sessions" and parts[2]:
        return unquote(parts[2])
    return None
