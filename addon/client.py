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
import logging
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import httpx
from httpx_sse import aconnect_sse, connect_sse

# The evaluator's models are loaded when an answer is first read as one (its lazy names): a process
# that only scores rewards (the finish's raw JSON) never pays for the evaluator's modules.
from webarena_live import evaluator as _evaluator
from webarena_live.client_calls import OLD_TOKEN_ENV as OLD_TOKEN_ENV  # importable here, as before
from webarena_live.client_calls import (
    TOKEN_ENV,
    ControlAPIError,
    DifferentAnswer,
    Notice,
    Started,
    _Call,
    _Calls,
    _headers,
    _notice,
    _read,
    _session_path,
    _start_timeout,
    token_from_env,
)

if TYPE_CHECKING:
    from webarena_live.evaluator import TaskProgress, TaskResult

DEFAULT_URL = "http://127.0.0.1:8081"
WAIT_NOTICE_AFTER = 1.0
"""Seconds a start may take before the client says it waits for a replica (a free one answers at once)."""
WAIT_NOTICE_EVERY = 30.0
"""Seconds between the lines a start that still waits for a replica logs."""

logger = logging.getLogger(__name__)


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


class _Connected(ABC):
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

    @abstractmethod
    def _connect(self, **options: Any) -> Any:
        """The httpx client, blocking or asynchronous."""


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
