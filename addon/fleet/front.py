"""The front of `serve --workers N`: the workers as the control API sees them, and the way to them.

`Front` knows where each session lives (`fleet/placement.py`), forwards a request to the worker that
owns its session with its headers as the client sent them (the worker checks the token and the page
guard, as it does on its own port), and starts a restarted worker's sessions again from their
journals. The routes are in `fleet/front_app.py` (docs/architecture.md, Workers).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import httpx
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from webarena_live.addon.control.app import PROXY_PORT_HEADER
from webarena_live.addon.control.errors import error_response
from webarena_live.addon.fleet.placement import Placement
from webarena_live.addon.fleet.workers import Worker, WorkerPool

logger = logging.getLogger("webarena_live.addon.fleet")

_HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "content-length"}
)
RETRY_AFTER_SECONDS = 1


class Front:
    """The fleet as the control API sees it: the workers, where each session lives, what each runs."""

    def __init__(self, placement: Placement) -> None:
        self.pool = WorkerPool(0, lambda index: (), on_down=lambda index: None, on_restart=_nothing)
        """Replaced by the running pool before the control port answers anything."""
        self.placement = placement
        self.starts: dict[str, dict[str, Any]] = {}
        """What each running session was started with (`task_id`, `run`), to resume it on a new worker."""
        self.http = httpx.AsyncClient(timeout=httpx.Timeout(None, connect=5))
        self.control_port = 0
        self.ready = False
        """Every worker answered once (until then `/health` answers 503)."""
        self.token: str | None = None
        """The control token, for the front's own calls (resuming sessions on a restarted worker)."""

    # --- the workers' side ----------------------------------------------------------------------

    def worker_down(self, index: int) -> None:
        self.placement.down.add(index)

    async def resume_on(self, index: int) -> None:
        """A restarted worker: start each of its running sessions again from its journal, at its port."""
        worker = self.pool[index]
        for name in self.placement.running_on(index):
            start = self.starts.get(name)
            port = self.placement.held_ports().get(name)
            if start is None or port is None:
                continue
            body = {**start, "session": name, "resume_journal": True}
            reply = await self._start_on(worker, body, port)
            if reply.status_code == 404:  # no event was journaled yet: nothing to resume
                body.pop("resume_journal")
                reply = await self._start_on(worker, body, port)
            if reply.status_code == 200:
                resumed = reply.json().get("resumed_events", 0)
                logger.warning(
                    "webarena-live: session %s resumed on worker %d with %d events", name, index, resumed
                )
            else:
                logger.error("webarena-live: session %s could not be resumed: %s", name, reply.text)
        self.placement.down.discard(index)

    async def _start_on(self, worker: Worker, body: dict[str, Any], port: int) -> httpx.Response:
        headers = {PROXY_PORT_HEADER: str(port)}
        token = self.token
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return await self.http.post(f"{worker.control_url}/sessions", json=body, headers=headers)

    def up_workers(self) -> list[Worker]:
        return [worker for worker in self.pool if worker.up and worker.index not in self.placement.down]

    # --- forwarding -----------------------------------------------------------------------------

    async def forward(
        self,
        worker: Worker,
        request: Request,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> Response:
        """The worker's answer to `request`, streamed back as it comes."""
        upstream = await self.send(worker, request, body, headers)
        if upstream is None:
            return self.unavailable(worker, request)
        return StreamingResponse(
            upstream.aiter_raw(),
            status_code=upstream.status_code,
            headers=answer_headers(upstream),
            background=BackgroundTask(upstream.aclose),
        )

    async def send(
        self, worker: Worker, request: Request, body: bytes | None, headers: dict[str, str] | None = None
    ) -> httpx.Response | None:
        """The worker's answer to `request` (its body not read yet), or None when the worker is gone."""
        raw_path = request.scope.get("raw_path") or request.url.path.encode()
        query = request.url.query
        url = f"{worker.control_url}{raw_path.decode('latin-1')}" + (f"?{query}" if query else "")
        sent = [(k, v) for k, v in request.headers.raw if k.decode("latin-1").lower() not in _HOP_BY_HOP]
        sent += [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
        content = body if body is not None else await request.body()
        outgoing = self.http.build_request(request.method, url, headers=sent, content=content)
        try:
            return await self.http.send(outgoing, stream=True)
        except httpx.TransportError:
            return None

    def unavailable(self, worker: Worker, request: Request | None = None) -> Response:
        detail = (
            f"worker {worker.index} is restarting; its sessions resume from their journals at the same "
            f"proxy addresses: retry in a moment"
        )
        where = {"method": request.method, "path": request.url.path} if request is not None else {}
        answer = error_response(503, "worker_unavailable", detail, **where)
        answer.headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return answer

    async def ask_all(self, request: Request, path: str) -> list[tuple[Worker, httpx.Response]] | Response:
        """Every worker's answer to `GET path` with the client's headers, or the first refusal."""
        workers = self.up_workers()
        replies = await asyncio.gather(*(self._get(worker, request, path) for worker in workers))
        for reply in replies:
            if reply is not None and reply.status_code != 200:
                return Response(reply.content, reply.status_code, headers=answer_headers(reply))
        return [(worker, reply) for worker, reply in zip(workers, replies, strict=True) if reply is not None]

    async def _get(self, worker: Worker, request: Request, path: str) -> httpx.Response | None:
        headers = [(k, v) for k, v in request.headers.raw if k.decode("latin-1").lower() not in _HOP_BY_HOP]
        try:
            return await self.http.get(f"{worker.control_url}{path}", headers=headers)
        except httpx.TransportError:
            return None


async def _nothing(index: int) -> None:
    return None


def answer_headers(upstream: httpx.Response) -> dict[str, str]:
    return {k: v for k, v in upstream.headers.items() if k.lower() not in _HOP_BY_HOP}
