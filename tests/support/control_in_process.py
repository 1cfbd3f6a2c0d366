"""Call the control app in-process, as the proxy's reserved host does: one request in, the whole
(buffered) answer out, so the route tests need no sockets. The control port's own behaviour (real
streaming, the 413 drain, keep-alive) is tested over real sockets in tests/control/test_control_server.py."""

from __future__ import annotations

import asyncio
import json
import threading
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import FastAPI

from tests.support.addon_helpers import SHOP, browser_headers, make_flow, write_tasks
from webarena_live.addresses.headers import CALLER_HEADER
from webarena_live.control.app import create_app
from webarena_live.control.context import ControlContext
from webarena_live.evaluator.sites import SiteMap
from webarena_live.evaluator.tasks import load_tasks
from webarena_live.proxy.capture import event_from_flow
from webarena_live.runs.sessions import SessionStore
from webarena_live.runs.settings import RunSettings

_APPS: weakref.WeakKeyDictionary[ControlContext, FastAPI] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes
    headers: dict[str, str]
    """Lower-cased names."""

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").split(";")[0]


def app_for(ctx: ControlContext | None) -> FastAPI:
    if ctx is None:
        return create_app(None)
    if ctx not in _APPS:
        _APPS[ctx] = create_app(ctx)
    return _APPS[ctx]


def handle_request(
    ctx: ControlContext | None,
    method: str,
    target: str,
    body: bytes = b"",
    *,
    caller: str | None = None,
    last_event_id: str | None = None,
    authorization: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> Reply:
    """Serve one request; streams answer with their snapshot (as through the proxy)."""
    sent = dict(headers or {})
    if caller is not None:
        sent[CALLER_HEADER] = caller
    if last_event_id is not None:
        sent["last-event-id"] = last_event_id
    if authorization is not None:
        sent["authorization"] = authorization
    coroutine = _serve(app_for(ctx), method, target, body, sent)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    # Called from inside a running loop (a test's own): serve on a loop of its own, in a thread.
    result: list[Reply] = []
    thread = threading.Thread(target=lambda: result.append(asyncio.run(coroutine)))
    thread.start()
    thread.join()
    return result[0]


def call(
    ctx: ControlContext, method: str, target: str, body: Any = b"", **kwargs: Any
) -> tuple[int, dict[str, Any]]:
    """One JSON request to the routes: its status and its parsed answer."""
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    reply = handle_request(ctx, method, target, raw, **kwargs)
    assert reply.content_type == "application/json", reply
    return reply.status, json.loads(reply.body)


async def _serve(app: FastAPI, method: str, target: str, body: bytes, headers: dict[str, str]) -> Reply:
    path, _, query = target.partition("?")
    raw = path.encode("latin-1")
    scope: dict[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.1"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": raw,
        "query_string": query.encode("latin-1"),
        "headers": [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()],
        "client": ("127.0.0.1", 1),
        "server": ("webarena-live.invalid", 80),
        "extensions": {"mitmproxy.master": None},  # served as through the proxy: streams are snapshots
    }
    delivered = asyncio.Event()
    answer: dict[str, Any] = {"body": b""}

    async def receive() -> dict[str, Any]:
        if not delivered.is_set():
            delivered.set()
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # never: the answer ends the call
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            answer["status"] = message["status"]
            answer["headers"] = {k.decode("latin-1"): v.decode("latin-1") for k, v in message["headers"]}
        elif message["type"] == "http.response.body":
            answer["body"] += message.get("body", b"")

    await app(scope, receive, send)
    return Reply(answer["status"], answer["body"], answer["headers"])


def shop_context(tmp_path: Path) -> ControlContext:
    """The control API's context on the test task file, the shop mapped, outputs and journals under
    `tmp_path`."""
    tasks = load_tasks(write_tasks(tmp_path))
    site_map = SiteMap.from_dict({"environments": {"__SHOPPING__": {"urls": [SHOP]}}})
    settings = RunSettings(site_map, output_dir=tmp_path / "out", journal_dir=tmp_path / "journal")
    return ControlContext(tasks=tasks, sessions=SessionStore(settings))


def visit(ctx: ControlContext, session: str, path: str) -> None:
    """A browser's navigation to `path` of the shop, captured in `session`."""
    event = event_from_flow(make_flow(url=f"{SHOP}{path}", headers=browser_headers(navigate=True)))
    ctx.sessions.get_or_create(session).append(event)
