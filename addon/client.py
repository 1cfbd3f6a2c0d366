"""A Python client for the control API, in a blocking and an asyncio flavour, on httpx.

    from webarena_live.client import Client

    with Client("http://127.0.0.1:8081") as api:
        started = api.start(1003, session="agent-7")
        ...                                   # the agent browses through http://agent-7:x@127.0.0.1:8082
        print(api.progress("agent-7").network)  # which expected requests were seen, by which event
        result = api.finish("agent-7", {"task_type": "navigate", "status": "SUCCESS", "retrieved_data": None})
        print(result.status, result.score)

`AsyncClient` has the same methods, awaited (`async for` over `events`).
Results come back as the evaluator's own models (`TaskResult`,
`TaskProgress`); a refused request raises `ControlAPIError` carrying the
API's status, error code and detail (`DifferentAnswer` when a finished
session is sent another final answer than the one judged). Each method is one request: its path and
body are built, and its answer read, by the same code in both flavours.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
import time
import warnings
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import httpx
from httpx_sse import aconnect_sse, connect_sse
from pydantic import BaseModel, ConfigDict

# The evaluator's models are loaded when an answer is first read as one (its lazy names): a process
# that only scores rewards (the finish's raw JSON) never pays for the evaluator's modules.
from webarena_live import evaluator as _evaluator
from webarena_live.evaluator import WebArenaLiveError

if TYPE_CHECKING:
    from webarena_live.evaluator import TaskProgress, TaskResult

DEFAULT_URL = "http://127.0.0.1:8081"
TOKEN_ENV = "WEBARENA_LIVE_CONTROL_TOKEN"
"""The control token's variable: the one `serve` reads its own from (addresses.credentials'
CONTROL_TOKEN_ENV, which the client may not import; tests/browsergym/test_control_api.py keeps them equal)."""
OLD_TOKEN_ENV = "WEBARENA_LIVE_TOKEN"
"""The name BrowserGym's environment read before: still read, with a warning, for one release."""
WAIT_NOTICE_AFTER = 1.0
"""Seconds a start may take before the client says it waits for a replica (a free one answers at once)."""
WAIT_NOTICE_EVERY = 30.0
"""Seconds between the lines a start that still waits for a replica logs."""

logger = logging.getLogger(__name__)


def token_from_env() -> str | None:
    """The control token from the environment: WEBARENA_LIVE_CONTROL_TOKEN, else the old
    WEBARENA_LIVE_TOKEN with a warning (renamed: one name for one setting), else None."""
    token = os.environ.get(TOKEN_ENV)
    if token:
        return token
    old = os.environ.get(OLD_TOKEN_ENV)
    if old:
        warnings.warn(
            f"{OLD_TOKEN_ENV} is renamed {TOKEN_ENV} (the variable serve reads): the old name is read "
            "for one more release",
            FutureWarning,
            stacklevel=2,
        )
        return old
    return None


class ControlAPIError(WebArenaLiveError):
    """The control API refused a request: its HTTP status, error code and detail."""

    def __init__(self, status: int, error: str, detail: Any) -> None:
        super().__init__(f"{status} {error}: {detail}")
        self.status = status
        self.error = error
        self.detail = detail


class DifferentAnswer(ControlAPIError):
    """A finished session's finish sent another final answer than the one its verdict judged (409
    `different_answer`): `judged` is the answer the verdict is for, `refused` the one sent now (each as
    the document it holds). The same answer again gets the same result; a new answer needs a new
    attempt (`start(..., restart=True)`)."""

    def __init__(self, status: int, error: str, detail: Any) -> None:
        super().__init__(status, error, detail)
        said = detail if isinstance(detail, dict) else {}
        self.judged = said.get("judged")
        self.refused = said.get("refused")


class Started(BaseModel):
    """What `POST /sessions` answers: the session, its task and where the agent starts."""

    model_config = ConfigDict(frozen=True, extra="allow")

    session: str
    task_id: int
    intent: str
    start_urls: list[str]
    sites: list[str]
    state: str | None = None
    resumed_events: int | None = None
    proxy: str | None = None
    """The session's own proxy address, `http://HOST:PORT`: traffic through it is this session's, with
    no credentials (released when the session finishes)."""
    worker: int | None = None
    """The worker process that holds the session (`serve --workers`)."""
    replicas: dict[str, str] | None = None
    """The session's lease: each site's placeholder -> the URL of the replica it works on (its start URLs
    are rendered on them)."""


class Notice(BaseModel):
    """One message of an event stream: `event` (a captured event), `session`, `reset` or `finished`."""

    model_config = ConfigDict(frozen=True)

    kind: str
    data: dict[str, Any]
    id: str | None = None


@dataclass(frozen=True)
class _Call:
    """One request of the API: method, path, JSON body, and how to read the answer."""

    method: str
    path: str
    body: Any = None
    params: dict[str, Any] | None = None


def _session_path(name: str, action: str = "") -> str:
    return f"/sessions/{quote(name, safe='')}" + (f"/{action}" if action else "")


def _start_body(task_id: int, options: dict[str, Any]) -> dict[str, Any]:
    return {
        "task_id": task_id,
        **{key: value for key, value in options.items() if value not in (None, False)},
    }


def _read(response: httpx.Response) -> Any:
    """The JSON answer, or ControlAPIError for a refusal (the API's `{"error", "detail"}`)."""
    if response.is_success:
        return response.json() if response.content else None
    try:
        body = response.json()
        error, detail = body.get("error", "http_error"), body.get("detail")
    except (ValueError, AttributeError):
        error, detail = "http_error", response.text[:500]
    if error == "different_answer":
        raise DifferentAnswer(response.status_code, error, detail)
    if response.status_code == 401:
        raise ControlAPIError(401, error, f"{detail} (the client sends ${TOKEN_ENV}, or its token=)")
    raise ControlAPIError(response.status_code, error, detail)


class _WaitNotices:
    """The lines a start that waits for a free replica logs: one after WAIT_NOTICE_AFTER seconds, then
    one every WAIT_NOTICE_EVERY, naming the session, its task and the task's sites (read once)."""

    def __init__(self, task_id: int, session: str | None, wait: float) -> None:
        self.what = f"session {session!r} (task {task_id})" if session else f"a session of task {task_id}"
        self.wait, self.began, self.sent, self.sites = wait, time.monotonic(), 0, ""

    def pause(self) -> float:
        """Seconds until the next line is due."""
        due = self.began + WAIT_NOTICE_AFTER + self.sent * WAIT_NOTICE_EVERY
        return max(0.0, due - time.monotonic())

    def line(self, task: Any = None) -> None:
        """Log the next line; `task` (the first time only) is the task's view, for its sites."""
        sites = task.get("sites") if isinstance(task, dict) else None
        if isinstance(sites, list) and sites:
            self.sites = f" of {', '.join(map(str, sites))}"
        waited, self.sent = time.monotonic() - self.began, self.sent + 1
        logger.warning("%s waits for a free replica%s: %.0f s so far, up to %.0f s",
                       self.what, self.sites, waited, self.wait)  # fmt: skip


def _start_timeout(options: dict[str, Any], default: Any) -> Any:
    """A start that may wait for a replica gets that long to answer, and the usual time beside."""
    wait = options.get("wait")
    if isinstance(wait, int | float) and wait > 0:
        return httpx.Timeout(default.read + float(wait) if default.read else None, connect=default.connect)
    return default


def _notice(kind: str, data: str, event_id: str | None) -> Notice | None:
    """A stream message as a Notice; None for one without data (the stream's `retry:` advice).

    Captured events are sent without an event name, which SSE reads as `message`.
    """
    if not data:
        return None
    return Notice(
        kind="event" if kind in ("", "message") else kind, data=json.loads(data), id=event_id or None
    )


def _headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


class _Calls:
    """The API's requests, shared by both clients."""

    health = _Call("GET", "/health")
    list_tasks = _Call("GET", "/tasks")
    list_sessions = _Call("GET", "/sessions")

    @staticmethod
    def start(task_id: int, **options: Any) -> _Call:
        return _Call("POST", "/sessions", _start_body(task_id, options))

    @staticmethod
    def session(
        name: str, action: str = "", body: Any = None, since: int = 0, status: list[int] | None = None
    ) -> _Call:
        method = "GET" if body is None else "POST"
        params: dict[str, Any] = {"since": since} if since else {}
        if status is not None:
            params["status"] = status
        return _Call(method, _session_path(name, action), body, params or None)


class _Connected:
    """How both clients are made: the API's address, its token, the requests' timeout."""

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        *,
        token: str | None = None,
        timeout: float = 60,
        verify: bool = True,
    ) -> None:
        """`verify=False` skips loading the CA certificates (tens of milliseconds): for http:// only."""
        self.http = self._connect(base_url=base_url, headers=_headers(token), timeout=timeout, verify=verify)

    def _connect(self, **options: Any) -> Any:
        raise NotImplementedError


class Client(_Connected):
    """The control API, one blocking request per method."""

    http: httpx.Client

    def _connect(self, **options: Any) -> httpx.Client:
        return httpx.Client(**options)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.http.close()

    def _do(self, call: _Call) -> Any:
        return _read(self.http.request(call.method, call.path, json=call.body, params=call.params))

    def health(self) -> dict[str, Any]:
        return self._do(_Calls.health)

    def tasks(self) -> list[dict[str, Any]]:
        return self._do(_Calls.list_tasks)["tasks"]

    def sessions(self) -> list[dict[str, Any]]:
        return self._do(_Calls.list_sessions)["sessions"]

    def start(self, task_id: int, *, session: str | None = None, **options: Any) -> Started:
        """Start a session on a task; options: `run`, `restart`, `reset`, `resume_journal`, `wait` (seconds
        for a free replica of each site: a start that waits logs so, every WAIT_NOTICE_EVERY s), `near`."""
        call = _Calls.start(task_id, session=session, **options)
        timeout = _start_timeout(options, self.http.timeout)
        if timeout is self.http.timeout:
            return Started.model_validate(self._do(call))
        notices, done = _WaitNotices(task_id, session, float(options["wait"])), threading.Event()

        def tell() -> None:
            while not done.wait(notices.pause()):
                try:
                    task = None if notices.sent else self.task(task_id)
                except (httpx.HTTPError, ControlAPIError):
                    task = None
                if not done.is_set():
                    notices.line(task)

        threading.Thread(target=tell, name="start-wait-notices", daemon=True).start()
        try:
            answer = self.http.request(call.method, call.path, json=call.body, timeout=timeout)
        finally:
            done.set()
        return Started.model_validate(_read(answer))

    def session(self, name: str) -> dict[str, Any]:
        return self._do(_Calls.session(name))

    def task(self, task_id: int) -> dict[str, Any]:
        """One task, its start URLs rendered (`GET /tasks/{id}`)."""
        return self._do(_Call("GET", f"/tasks/{task_id}"))

    def abandon(self, name: str, reason: str | None = None) -> dict[str, Any]:
        """End the session's lease now (`POST /sessions/{s}/abandon`): its replicas go back at once."""
        return self._do(_Calls.session(name, "abandon", body={"reason": reason} if reason else {}))

    def trace(self, name: str, *, since: int = 0, status: list[int] | None = None) -> list[dict[str, Any]]:
        """The events so far; with `status`, only those that got one of these statuses (0: none)."""
        return self._do(_Calls.session(name, "trace", since=since, status=status))["events"]

    def progress(self, name: str) -> TaskProgress:
        return _evaluator.TaskProgress.model_validate(self._do(_Calls.session(name, "progress")))

    def preview(self, name: str, response: Any) -> TaskResult:
        """The result a finish would give now, without finishing (`"preview": true` in the document)."""
        return _evaluator.TaskResult.model_validate(self._do(_Calls.session(name, "preview", body=response)))

    def finish(self, name: str, response: Any) -> TaskResult:
        """Judge the session with the agent's final response. A finished session: the same answer gets
        the same result; another raises `DifferentAnswer` (its verdict judged the first)."""
        return _evaluator.TaskResult.model_validate(self._do(_Calls.session(name, "finish", body=response)))

    def finish_document(self, name: str, response: Any) -> dict[str, Any]:
        """The finish's answer as the API sent it, every field kept (`TaskResult` keeps the verdict's
        own; this keeps what the server adds beside them, such as `interference`)."""
        return self._do(_Calls.session(name, "finish", body=response))

    def har(self, name: str) -> dict[str, Any]:
        return self._do(_Calls.session(name, "har"))

    def events(self, name: str | None = None, *, since: int = 0) -> Iterator[Notice]:
        """The session's notices as they happen (every session's with no name); ends when the stream does."""
        path = _session_path(name, "events") if name is not None else "/events"
        params = {"since": since} if since else None
        with connect_sse(self.http, "GET", path, params=params, timeout=None) as source:
            if not source.response.is_success:
                source.response.read()
                _read(source.response)
            for message in source.iter_sse():
                if (notice := _notice(message.event, message.data, message.id)) is not None:
                    yield notice


class AsyncClient(_Connected):
    """The control API for asyncio code: the same methods as `Client`, awaited."""

    http: httpx.AsyncClient

    def _connect(self, **options: Any) -> httpx.AsyncClient:
        return httpx.AsyncClient(**options)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self.http.aclose()

    async def _do(self, call: _Call) -> Any:
        return _read(await self.http.request(call.method, call.path, json=call.body, params=call.params))

    async def health(self) -> dict[str, Any]:
        return await self._do(_Calls.health)

    async def tasks(self) -> list[dict[str, Any]]:
        return (await self._do(_Calls.list_tasks))["tasks"]

    async def sessions(self) -> list[dict[str, Any]]:
        return (await self._do(_Calls.list_sessions))["sessions"]

    async def start(self, task_id: int, *, session: str | None = None, **options: Any) -> Started:
        call = _Calls.start(task_id, session=session, **options)
        timeout = _start_timeout(options, self.http.timeout)
        if timeout is self.http.timeout:
            return Started.model_validate(await self._do(call))
        notices = _WaitNotices(task_id, session, float(options["wait"]))

        async def tell() -> None:
            while True:
                await asyncio.sleep(notices.pause())
                try:
                    task = None if notices.sent else await self.task(task_id)
                except (httpx.HTTPError, ControlAPIError):
                    task = None
                notices.line(task)

        teller = asyncio.create_task(tell())
        try:
            answer = await self.http.request(call.method, call.path, json=call.body, timeout=timeout)
        finally:
            teller.cancel()
        return Started.model_validate(_read(answer))

    async def session(self, name: str) -> dict[str, Any]:
        return await self._do(_Calls.session(name))

    async def task(self, task_id: int) -> dict[str, Any]:
        return await self._do(_Call("GET", f"/tasks/{task_id}"))

    async def abandon(self, name: str, reason: str | None = None) -> dict[str, Any]:
        return await self._do(_Calls.session(name, "abandon", body={"reason": reason} if reason else {}))

    async def trace(
        self, name: str, *, since: int = 0, status: list[int] | None = None
    ) -> list[dict[str, Any]]:
        return (await self._do(_Calls.session(name, "trace", since=since, status=status)))["events"]

    async def progress(self, name: str) -> TaskProgress:
        return _evaluator.TaskProgress.model_validate(await self._do(_Calls.session(name, "progress")))

    async def preview(self, name: str, response: Any) -> TaskResult:
        return _evaluator.TaskResult.model_validate(
            await self._do(_Calls.session(name, "preview", body=response))
        )

    async def finish(self, name: str, response: Any) -> TaskResult:
        return _evaluator.TaskResult.model_validate(
            await self._do(_Calls.session(name, "finish", body=response))
        )

    async def finish_document(self, name: str, response: Any) -> dict[str, Any]:
        return await self._do(_Calls.session(name, "finish", body=response))

    async def har(self, name: str) -> dict[str, Any]:
        return await self._do(_Calls.session(name, "har"))

    async def events(self, name: str | None = None, *, since: int = 0) -> AsyncIterator[Notice]:
        path = _session_path(name, "events") if name is not None else "/events"
        params = {"since": since} if since else None
        async with aconnect_sse(self.http, "GET", path, params=params, timeout=None) as source:
            if not source.response.is_success:
                await source.response.aread()
                _read(source.response)
            async for message in source.aiter_sse():
                if (notice := _notice(message.event, message.data, message.id)) is not None:
                    yield notice


def proxy_url(session: str, *, host: str = "127.0.0.1", port: int = 8082) -> str:
    """The proxy address that puts traffic into `session` (the session port asks browsers for it)."""
    return f"http://{quote(session, safe='')}:x@{host}:{port}"


__all__ = [
    "TOKEN_ENV",
    "AsyncClient",
    "Client",
    "ControlAPIError",
    "DifferentAnswer",
    "Notice",
    "Started",
    "proxy_url",
    "token_from_env",
]
