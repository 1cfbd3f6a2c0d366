"""The control API's pure ASGI middleware: what holds for every route, before any route runs.

Pure ASGI (not Starlette's BaseHTTPMiddleware) so the event streams pass
through untouched. From the outside in:

- `CommonHeaders`: the `Server` name and the safety headers on every answer;
- `RawPath`: routes match the path as sent, percent-encoding intact, so a
  session name may hold any character, `/` included (`%2F`); a trailing slash
  is dropped instead of redirected;
- `BodyCap`: the whole body is read before anything answers (a client still
  writing when the server answers gets a reset, not the answer), and over
  10 MiB it is drained and answered with a JSON 413.

The guard (control/guard.py) is the routers' dependency (control/dependencies.py), not a middleware.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from webarena_live.control.errors import error_response
from webarena_live.evaluator import __version__

logger = logging.getLogger("webarena_live.control")

MAX_CONTROL_BODY = 10 * 1024 * 1024
"""Largest control request body (10 MiB): a final response is small; this only stops abuse."""

DISCARD_LIMIT = 256 * 1024 * 1024
"""Bytes of an oversized body read and dropped before the 413 is sent; past this it is cut off."""

COMMON_HEADERS = (
    (b"server", f"webarena-live/{__version__}".encode()),
    # No CORS headers on purpose: web pages must not read or drive the control API (control/guard.py).
    (b"x-content-type-options", b"nosniff"),
)


class _HttpMiddleware(ABC):
    """A pure ASGI middleware that works on HTTP requests (`handle`) and passes anything else on."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        return await self.handle(scope, receive, send)

    @abstractmethod
    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None: ...


class CommonHeaders(_HttpMiddleware):
    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                if not any(name.lower() == b"cache-control" for name, _ in headers):
                    headers.append((b"cache-control", b"no-store"))
                message = {**message, "headers": [*headers, *COMMON_HEADERS]}
            await send(message)

        await self.app(scope, receive, with_headers)


class RawPath(_HttpMiddleware):
    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw = scope.get("raw_path") or scope["path"].encode("utf-8")
        path = raw.decode("latin-1").partition("?")[0]
        if len(path) > 1 and path.endswith("/"):
            path = path.rstrip("/") or "/"
        await self.app({**scope, "path": path}, receive, send)


class BodyCap(_HttpMiddleware):
    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = bytearray()
        size, more = 0, True
        while more and size <= DISCARD_LIMIT:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size <= MAX_CONTROL_BODY:
                body += chunk
            else:
                body.clear()  # keep reading, so the client gets to read the 413
            more = message.get("more_body", False)
        if size > MAX_CONTROL_BODY:
            detail = f"request body over {MAX_CONTROL_BODY} bytes"
            response = error_response(413, "too_large", detail, method=scope["method"], path=scope["path"])
            response.headers["connection"] = "close"
            return await response(scope, receive, send)
        delivered = False

        async def replay() -> Message:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()  # after the body only a disconnect comes (streams watch for it)

        await self.app(scope, replay, send)
