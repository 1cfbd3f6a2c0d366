"""The front of `serve --workers N`: the workers as the control API sees them, and the way to them.

`Front` knows where each session lives (`addresses/placement.py`), forwards a request to the worker that
owns its session with its headers as the client sent them (the worker checks the token and the page
guard, as it does on its own port), and starts a restarted worker's sessions again from their
journals. Every call to a worker has a deadline, and a call to a worker that stops answering
(`fleet/liveness.py`) is given up at once: no route waits on a stalled worker. The routes are in
`fleet/front_app.py` (docs/architecture.md, Workers).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import httpx
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from webarena_live.addresses.headers import FRONT_SET, PROXY_PORT_HEADER
from webarena_live.addresses.placement import Placement
from webarena_live.control.errors import JsonResponse, error_response
from webarena_live.control.guard import page_request_problem, token_problem
from webarena_live.evaluator import ATTEMPT_FILES, WebArenaLiveError, locate_attempt
from webarena_live.fleet.carry import CarriedOutputs
from webarena_live.fleet.front_leases import FrontLeases
from webarena_live.fleet.workers import Worker, WorkerPool, Workers

logger = logging.getLogger("webarena_live.fleet")

_HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "content-length"}
)
RETRY_AFTER_SECONDS = 1
CARRY_ATTEMPTS = 5
"""Times a finished session's files are looked up again when a later finish moved them meanwhile."""
CONNECT_DEADLINE = 5.0
CALL_DEADLINE = 30.0
"""Seconds a forwarded request may wait for the worker's next byte (its answer, or the next part of
a stream: event streams send a heartbeat every 15 s) before the front answers 504 naming it."""
ASK_DEADLINE = 5.0
"""Seconds each worker has to answer a question the front asks all of them (`GET /sessions`)."""
HEALTH_DEADLINE = 3.0
"""Seconds each worker has to answer `/health`: one that does not is listed `unresponsive`."""
RESUME_DEADLINE = 20.0
RESUME_TRIES = 3
"""Tries to resume a session on its restarted worker (a try cut short by the worker's death counts)
before it is reported `lost` with the reason."""


class Front:
    """The fleet as the control API sees it: the workers, where each session lives, what each runs."""

    def __init__(self, placement: Placement) -> None:
        self.pool: Workers = WorkerPool(0, lambda index: (), on_down=lambda index: None, on_restart=_nothing)
        """Replaced by the running pool before the control port answers anything."""
        self.placement = placement
        self.starts: dict[str, dict[str, Any]] = {}
        """What each running session was started with (`task_id`, `run`), to resume it on a new worker."""
        self.http = httpx.AsyncClient(timeout=httpx.Timeout(CALL_DEADLINE, connect=CONNECT_DEADLINE))
        self.listening: dict[str, int | None] = {}
        """The front's own ports for `/health` (`proxy_port`, `session_port`, `control_port`)."""
        self.ready = False
        """Every worker answered once (until then `/health` answers 503)."""
        self.token: str | None = None
        """The control token, for the front's own calls (resuming sessions on a restarted worker)."""
        self.worker_token: str | None = None
        """The workers' token when it is not the operator's (`--ray` with no control token: the
        workers listen on their nodes' addresses, so the front makes one and adds it to what it sends)."""
        self.lost: dict[str, dict[str, Any]] = {}
        """The sessions that cannot go on (their node left, or no resume succeeded), as listed."""
        self.finished: dict[str, dict[str, Any]] = {}
        """The view of each session finished through the front, as its worker last gave it: listed
        after that worker restarted (a new worker knows only the sessions it resumed)."""
        self.resume_failures: dict[str, int] = {}
        """Failed (or cut short) tries to resume each session, reset when one succeeds."""
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
        for name in self.placement.running_on(index):
            self.session_lost(name, reason)

    def session_lost(self, name: str, reason: str) -> None:
        """Session `name` cannot go on: reported `lost` with `reason`, its name and port freed."""
        owner = self.placement.owner(name)
        worker = self.pool[owner] if owner is not None else None
        start = self.starts.pop(name, {})
        port = self.placement.port_of(name)
        node = worker.node if worker else None
        view = {"session": name, "state": "lost", "reason": reason, "task_id": start.get("task_id"),
                "run": start.get("run"), "worker": owner, "node": node}  # fmt: skip
        self.lost[name] = view
        self.resume_failures.pop(name, None)
        self.placement.forget(name)
        if self.leases is not None:
            self.leases.release(name, "lost")
        if worker is not None and port is not None:
            self.pool.forget_port(worker.index, port)
        logger.error("webarena-live: session %s is lost: %s", name, reason)
        self.announce("lost", view)

    def announce(self, kind: str, data: dict[str, Any]) -> None:
        """A notice of the front's own, to every merged `/events` stream open now."""
        message = f"event: {kind}\ndata: {json.dumps(data)}\n\n".encode()
        for queue in self.listeners:
            queue.put_nowait(message)

    async def resume_on(self, index: int) -> None:
        """A restarted worker: start each of its running sessions again from its journal, at its port.
        A session whose resume is refused, or fails `RESUME_TRIES` times (tries cut short by the
        worker's death count too), is reported `lost` with the reason: none waits for ever."""
        worker = self.pool[index]
        for name in self.placement.running_on(index):
            start = self.starts.get(name)
            port = self.placement.port_of(name)
            if start is None or port is None:
                continue
            while name in self.starts:
                if self.resume_failures.get(name, 0) >= RESUME_TRIES:
                    self.session_lost(name, f"no resume on worker {index} succeeded in {RESUME_TRIES} tries")
                    break
                self.resume_failures[name] = self.resume_failures.get(name, 0) + 1  # kept if cut short
                problem, final = await self._resume(worker, name, start, port)
                if problem is None:
                    self.resume_failures.pop(name, None)
                    break
                logger.error("webarena-live: session %s could not be resumed on worker %d: %s",
                             name, index, problem)  # fmt: skip
                if final:
                    self.session_lost(name, f"worker {index} refused to resume it: {problem}")
                    break
                await asyncio.sleep(RETRY_AFTER_SECONDS)
        self.placement.down.discard(index)

    async def _resume(
        self, worker: Worker, name: str, start: dict[str, Any], port: int
    ) -> tuple[str | None, bool]:
        """One try: (what went wrong or None, whether trying again is pointless)."""
        body = {**start, "session": name, "resume_journal": True}
        try:
            reply = await self._start_on(worker, body, port)
            if reply.status_code == 404 and reply.json().get("error") == "no_journal":
                body.pop("resume_journal")  # no event was journaled yet: nothing to resume
                reply = await self._start_on(worker, body, port)
        except httpx.HTTPError as error:
            return f"{type(error).__name__}: {error}", False
        if reply.status_code == 200:
            resumed = reply.json().get("resumed_events", 0)
            logger.warning("webarena-live: session %s resumed on worker %d with %d events",
                           name, worker.index, resumed)  # fmt: skip
            return None, False
        if reply.status_code == 409 and error_of(reply.content) == "session_running":
            # A new `serve` knows only the sessions resumed on it: a try the front counted as failed
            # (the worker died as it answered, or the request waited in the kept socket's backlog for
            # its successor) or the round before a second death resumed it already.
            logger.warning("webarena-live: session %s runs on worker %d already", name, worker.index)
            return None, False
        return f"{reply.status_code} {reply.text.strip()}", reply.status_code < 500

    async def _start_on(self, worker: Worker, body: dict[str, Any], port: int) -> httpx.Response:
        headers = {PROXY_PORT_HEADER: str(port), **self.auth()}
        return await self.http.post(
            f"{worker.control_url}/sessions", json=body, headers=headers, timeout=RESUME_DEADLINE
        )

    def workers_near(self, near: str) -> list[int]:
        """The workers on the node an agent asked to be `near` (its Ray node id or its address); with
        local workers, all: they share the agent's machine."""
        if all(worker.node is None for worker in self.pool):
            return [worker.index for worker in self.pool]
        return [w.index for w in self.pool if near in (w.node, w.host) and w.index not in self.placement.down]

    def owner_worker(self, name: str) -> Worker | None:
        """The worker that holds session `name`, None when none does."""
        owner = self.placement.owner(name)
        return self.pool[owner] if owner is not None else None

    def up_workers(self) -> list[Worker]:
        """The workers that are up and answer."""
        return [w for w in self.pool if w.up and w.responsive and w.index not in self.placement.down]

    def state_of(self, worker: Worker) -> str:
        """`up`, `restarting`, `unresponsive` (alive, not answering) or `lost` (its node left)."""
        if worker.node_lost:
            return "lost"
        if not worker.up or worker.index in self.placement.down:
            return "restarting"
        return "up" if worker.responsive else "unresponsive"

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
        if isinstance(upstream, Response):
            return upstream
        return StreamingResponse(
            upstream.aiter_raw(),
            status_code=upstream.status_code,
            headers=answer_headers(upstream),
            background=BackgroundTask(upstream.aclose),
        )

    async def send(
        self, worker: Worker, request: Request, body: bytes | None, headers: dict[str, str] | None = None
    ) -> httpx.Response | Response:
        """The worker's answer to `request` (its body not read yet), or the JSON refusal the client gets
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
        if not sending.done():  # it stopped answering meanwhile (fleet/liveness.py): no more waiting
            sending.cancel()
            return self.unresponsive(worker, request)
        try:
            answer = sending.result()
        except httpx.TimeoutException:
            return self.timed_out(worker, request)
        except httpx.TransportError:
            return self.unavailable(worker, request)
        if answer.status_code == 404 and self._resuming_on(worker, request):
            await answer.aclose()  # a new worker process took the kept port before its sessions came back
            return self.unavailable(worker, request)
        return answer

    def _resuming_on(self, worker: Worker, request: Request) -> bool:
        """Whether `request` names a running session of `worker` that the worker does not know (yet): a
        worker that died and came back answers on its kept port before it has resumed its sessions."""
        name = session_of(request.url.path)
        return name is not None and name in self.starts and self.placement.owner(name) == worker.index

    def unavailable(self, worker: Worker, request: Request | None = None) -> Response:
        detail = (
            f"worker {worker.index} is restarting; its sessions resume from their journals at the same "
            f"proxy addresses: retry in a moment"
        )
        return self.refused(503, "worker_unavailable", detail, worker, request)

    def unresponsive(self, worker: Worker, request: Request | None = None) -> Response:
        detail = (
            f"worker {worker.index} (pid {worker.pid}) does not answer; its sessions are kept and "
            "go on when it answers again: retry in a moment"
        )
        return self.refused(503, "worker_unresponsive", detail, worker, request)

    def timed_out(self, worker: Worker, request: Request | None = None) -> Response:
        detail = f"worker {worker.index} did not answer within {CALL_DEADLINE:.0f}s"
        return self.refused(504, "worker_timeout", detail, worker, request)

    @staticmethod
    def refused(status: int, error: str, detail: str, worker: Worker, request: Request | None) -> Response:
        """A JSON refusal naming the worker (`worker`, `node`), with `Retry-After`."""
        where = f"{request.method} {request.url.path}" if request is not None else ""
        logger.info("refused %s: %d %s: %s", where, status, error, detail)
        body = {"error": error, "detail": detail, "worker": worker.index, "node": worker.node}
        answer = JsonResponse(body, status_code=status)
        answer.headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return answer

    async def ask_all(
        self, request: Request, path: str, *, deadline: float = ASK_DEADLINE
    ) -> list[tuple[Worker, httpx.Response | None]] | Response:
        """Every answering worker's reply to `GET path` with the client's headers (None from one that
        did not answer within `deadline`), or the first refusal."""
        workers = self.up_workers()
        replies = await asyncio.gather(*(self._get(worker, request, path, deadline) for worker in workers))
        for reply in replies:
            if reply is not None and reply.status_code != 200:
                return Response(reply.content, reply.status_code, headers=answer_headers(reply))
        return list(zip(workers, replies, strict=True))

    async def remember_finished(self, worker: Worker, name: str) -> None:
        """Keep the view of a session its worker just finished, to list it after that worker restarts."""
        try:
            url = f"{worker.control_url}/sessions/{quote(name, safe='')}"
            reply = await self.http.get(url, headers=self.auth(), timeout=ASK_DEADLINE)
        except httpx.HTTPError:
            return
        if reply.status_code == 200:
            self.finished[name] = {**reply.json(), "worker": worker.index, "node": worker.node}

    async def carry_outputs(self, worker: Worker, name: str) -> None:
        """The files of a session the worker just finished, written into this machine's output dir
        (`self.outputs`); their paths here are what the session's view shows from then on. When they
        cannot be carried the verdict stands, and the view says where the files stayed."""
        assert self.outputs is not None
        self.carried.pop(name, None)  # until carried, the view shows where the worker wrote them
        try:
            url = f"{worker.control_url}/sessions/{quote(name, safe='')}"
            for _ in range(CARRY_ATTEMPTS):  # a later finish of the task there may move them aside
                reply = await self.http.get(url, headers=self.auth(), timeout=ASK_DEADLINE)
                written = reply.json().get("outputs") if reply.status_code == 200 else None
                if not written:
                    return
                carried = await self.outputs.carry(worker.index, name, written)
                if carried is not None:
                    self.carried[name] = carried
                    return
            raise WebArenaLiveError(f"its files kept moving on worker {worker.index}")
        except Exception as error:  # Ray's and httpx's errors alike, a deadline passed: the verdict stands
            where = f"node {worker.node}"
            logger.error("webarena-live: the files of session %s stay on %s: %r", name, where, error)

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
        token = self.token or self.worker_token
        return {"Authorization": f"Bearer {token}"} if token else {}

    def passed_auth(self) -> dict[str, str]:
        """What a client's request forwarded to a worker gets added: the workers' own token when the
        operator set none (with one, the client's own goes through and the worker checks it)."""
        return self.auth() if self.token is None else {}

    async def refusal(self, request: Request) -> Response | None:
        """The refusal of `request`'s credentials (page guard, token) on a route the front answers
        itself, by the workers' own rules (`control/guard.py`); None when they would be accepted."""
        headers = {name.lower(): value for name, value in request.headers.items()}
        if problem := page_request_problem(request.method, headers):
            return error_response(403, "page_request_refused", problem, method=request.method,
                                  path=request.url.path)  # fmt: skip
        if problem := token_problem(self.token, headers.get("authorization")):
            return error_response(401, "unauthorized", problem, method=request.method, path=request.url.path)
        return None

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


async def _nothing(index: int) -> None:
    return None


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
