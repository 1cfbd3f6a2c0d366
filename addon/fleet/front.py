"""The front of `serve --workers N`: the workers as the control API sees them, and the way to them.

`Front` knows where each session lives (`addresses/placement.py`), forwards a request to the worker that
owns its session with its headers as the client sent them (the worker checks the token and the page
guard, as it does on its own port), and starts a restarted worker's sessions again from their
journals. The routes are in `fleet/front_app.py` (docs/architecture.md, Workers).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from webarena_live.addresses.placement import Placement
from webarena_live.control.app import PROXY_PORT_HEADER
from webarena_live.control.errors import error_response
from webarena_live.evaluator import (
    ATTEMPT_FILE,
    ATTEMPT_FILES,
    ATTEMPTS_DIR,
    EARLIER_ATTEMPT,
    WebArenaLiveError,
    aside_dir,
    locate_attempt,
    place_run,
    task_dir,
)
from webarena_live.fleet.front_leases import FrontLeases
from webarena_live.fleet.workers import Worker, WorkerPool, Workers

logger = logging.getLogger("webarena_live.fleet")

_HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "content-length"}
)
RETRY_AFTER_SECONDS = 1
CARRY_ATTEMPTS = 5
"""Times a finished session's files are looked up again when a later finish moved them meanwhile."""


class Front:
    """The fleet as the control API sees it: the workers, where each session lives, what each runs."""

    def __init__(self, placement: Placement) -> None:
        self.pool: Workers = WorkerPool(0, lambda index: (), on_down=lambda index: None, on_restart=_nothing)
        """Replaced by the running pool before the control port answers anything."""
        self.placement = placement
        self.starts: dict[str, dict[str, Any]] = {}
        """What each running session was started with (`task_id`, `run`), to resume it on a new worker."""
        self.http = httpx.AsyncClient(timeout=httpx.Timeout(None, connect=5))
        self.listening: dict[str, int | None] = {}
        """The front's own ports for `/health` (`proxy_port`, `session_port`, `control_port`)."""
        self.ready = False
        """Every worker answered once (until then `/health` answers 503)."""
        self.token: str | None = None
        """The control token, for the front's own calls (resuming sessions on a restarted worker)."""
        self.lost: dict[str, dict[str, Any]] = {}
        """The sessions whose worker's node left the cluster, as `GET /sessions` lists them."""
        self.listeners: set[asyncio.Queue[bytes | None]] = set()
        """The merged `/events` streams open now: the front's own notices (`lost`) go to each."""
        self.outputs: CarriedOutputs | None = None
        """Set when the workers write on other machines: their files are carried here."""
        self.carried: dict[str, tuple[Path, str]] = {}
        """Each session's carried files on this machine, by session name: the task folder they were
        written to and the attempt's id (`locate_attempt` finds them after a later attempt moved them)."""
        self.report: Callable[[str | None], Awaitable[dict[str, Any]]] | None = None
        """`GET /report` of the carried outputs (else a worker answers it from the shared directory)."""
        self.leases: FrontLeases | None = None
        """The replica pool (`front_leases.py`), when a site map is loaded."""

    # --- the workers' side ----------------------------------------------------------------------

    def worker_down(self, index: int) -> None:
        self.placement.down.add(index)

    def worker_lost(self, index: int, reason: str) -> None:
        """The worker's node is gone: its running sessions cannot resume. Each is reported `lost`
        (`GET /sessions`, the log, a `lost` notice), and its name may be started again elsewhere."""
        worker = self.pool[index]
        for name in self.placement.running_on(index):
            start = self.starts.pop(name, {})
            view = {"session": name, "state": "lost", "reason": reason, "worker": index, "node": worker.node,
                    "task_id": start.get("task_id"), "run": start.get("run")}  # fmt: skip
            self.lost[name] = view
            self.placement.forget(name)
            if self.leases is not None:
                self.leases.release(name, "lost")
            logger.error("webarena-live: session %s is lost: %s", name, reason)
            self.announce("lost", view)

    def announce(self, kind: str, data: dict[str, Any]) -> None:
        """A notice of the front's own, to every merged `/events` stream open now."""
        message = f"event: {kind}\ndata: {json.dumps(data)}\n\n".encode()
        for queue in self.listeners:
            queue.put_nowait(message)

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
        headers = {PROXY_PORT_HEADER: str(port), **self.auth()}
        return await self.http.post(f"{worker.control_url}/sessions", json=body, headers=headers)

    def workers_near(self, near: str) -> list[int]:
        """The workers on the node an agent asked to be `near` (its Ray node id or its address); with
        local workers, all: they share the agent's machine."""
        if all(worker.node is None for worker in self.pool):
            return [worker.index for worker in self.pool]
        return [w.index for w in self.pool if near in (w.node, w.host) and w.index not in self.placement.down]

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

    async def carry_outputs(self, worker: Worker, name: str) -> None:
        """The files of a session the worker just finished, written into this machine's output dir
        (`self.outputs`); their paths here are what the session's view shows from then on. When they
        cannot be carried the verdict stands, and the view says where the files stayed."""
        assert self.outputs is not None
        self.carried.pop(name, None)  # until carried, the view shows where the worker wrote them
        try:
            url = f"{worker.control_url}/sessions/{quote(name, safe='')}"
            for _ in range(CARRY_ATTEMPTS):  # a later finish of the task there may move them aside
                reply = await self.http.get(url, headers=self.auth())
                written = reply.json().get("outputs") if reply.status_code == 200 else None
                if not written:
                    return
                carried = await self.outputs.carry(worker.index, written)
                if carried is not None:
                    self.carried[name] = carried
                    return
            raise WebArenaLiveError(f"its files kept moving on worker {worker.index}")
        except Exception as error:  # Ray's and httpx's errors alike: the verdict stands
            where = f"node {worker.node}"
            logger.error("webarena-live: the files of session %s stay on %s: %s", name, where, error)

    def carried_files(self, name: str) -> dict[str, str] | None:
        """Where session `name`'s carried files are on this machine now, by file name; None when none
        were carried."""
        if name not in self.carried:
            return None
        directory, attempt = self.carried[name]
        found = locate_attempt(directory, attempt)
        if found is None:
            return {}
        return {file: str(found / file) for file in ATTEMPT_FILES if (found / file).exists()}

    def auth(self) -> dict[str, str]:
        """The front's own credentials for its calls to the workers."""
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    async def refusal(self, request: Request) -> Response | None:
        """A worker's refusal of `request`'s credentials (token, page guard) on a route the front
        answers itself, or None when they would be accepted."""
        replies = await self.ask_all(request, "/sessions")
        return replies if isinstance(replies, Response) else None

    async def _get(self, worker: Worker, request: Request, path: str) -> httpx.Response | None:
        headers = [(k, v) for k, v in request.headers.raw if k.decode("latin-1").lower() not in _HOP_BY_HOP]
        try:
            return await self.http.get(f"{worker.control_url}{path}", headers=headers)
        except httpx.TransportError:
            return None


@dataclass
class CarriedOutputs:
    """Where the files of sessions finished on other machines go (`serve --output-dir` of the front),
    and how they are read from the worker that wrote them."""

    output_dir: Path
    worker_dir: Callable[[int], str]
    """A worker's own output folder, on its node."""
    read: Callable[[int, list[str]], Awaitable[dict[str, bytes]]]

    async def carry(self, index: int, written: dict[str, str]) -> tuple[Path, str] | None:
        """The files a worker wrote for one finished session, written here in the same layout (an
        earlier attempt here moved aside first, as the worker did there): the task folder here and the
        attempt's id. None when they are no longer where `written` says (moved aside there by a later
        finish: ask again)."""
        files = {name: path for name, path in written.items() if name != EARLIER_ATTEMPT}
        contents = await self.read(index, list(files.values()))
        if set(contents) != set(files.values()) or ATTEMPT_FILE not in files:
            return None
        by_name = {Path(path).name: contents[path] for path in files.values()}
        record = json.loads(by_name[ATTEMPT_FILE])
        directory = task_dir(self.output_dir, int(record["task_id"]), record.get("run"))
        if ATTEMPTS_DIR in Path(files[ATTEMPT_FILE]).parts:  # a later finish there moved it aside already
            place_run(aside_dir(directory), by_name)
        else:
            place_run(directory, by_name)
        return directory, str(record["attempt"])

    def local(self, index: int, written: dict[str, str]) -> dict[str, str]:
        """A worker's paths of a session's files as their paths here (for its views)."""
        root = Path(self.worker_dir(index))
        local = {}
        for name, path in written.items():
            try:
                local[name] = str(self.output_dir / Path(path).relative_to(root))
            except ValueError:
                local[name] = path
        return local


async def _nothing(index: int) -> None:
    return None


def answer_headers(upstream: httpx.Response) -> dict[str, str]:
    return {k: v for k, v in upstream.headers.items() if k.lower() not in _HOP_BY_HOP}
