"""The control port: a small HTTP/1.1 server in the proxy's own event loop.

mitmproxy's built-in WSGI/ASGI hosting buffers whole responses, which would
make the event stream useless, so the control port has its own server:
`asyncio.start_server` for sockets and h11 (already a mitmproxy dependency)
for HTTP framing. Running in the proxy's loop means the routes touch the
sessions from the same thread as capture does — no locks — and an event
captured in `response` reaches stream subscribers without a thread hop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from http import HTTPStatus
from typing import Any
from urllib.parse import unquote

import h11

from webarena_live.addon.control import (
    MAX_CONTROL_BODY,
    ControlContext,
    Reply,
    handle_request,
    json_reply,
    sse_message,
)
from webarena_live.evaluator import __version__

logger = logging.getLogger(__name__)

MAX_BODY = MAX_CONTROL_BODY
"""Largest request body accepted (a final response is small; this only stops abuse)."""

HEARTBEAT_SECONDS = 15.0
"""An SSE comment this often keeps idle streams open through intermediaries and finds dead clients."""

STREAM_BACKLOG = 10_000
"""Notices queued for one slow stream client before it is cut off."""

SAFETY_HEADERS = (
    # No CORS headers on purpose: web pages must not read or drive the control API (addon.guard).
    ("X-Content-Type-Options", "nosniff"),
    ("Cache-Control", "no-store"),
)

SERVER_HEADER = ("Server", f"webarena-live/{__version__}")

CALLER_HEADER = "X-WebArena-Live-Caller"
"""Set by the addon when it hands a control request from the proxy to this port: the caller's session
(percent-encoded). Only picks the session `POST /sessions` starts when its body names none, which any
client of this port can do anyway, so it needs no protection."""


DISCARD_LIMIT = 256 * 1024 * 1024
"""Bytes of an oversized body read and dropped before the 413 is sent: a client that is still writing
when the server closes gets a connection reset instead of the answer. Past this it is cut off."""


class RequestTooLarge(Exception):
    """A request body over `MAX_BODY`."""


class ControlServer:
    """Serves `addon.control` on a TCP port; `start()` binds, `stop()` closes everything."""

    def __init__(self, ctx: ControlContext, *, host: str, port: int) -> None:
        self.ctx = ctx
        self.host = host
        self.port = port
        self._server: asyncio.Server | None = None
        self._clients: set[asyncio.Task[Any]] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, self.host, self.port)
        sockets = self._server.sockets
        if sockets:
            self.port = sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for task in list(self._clients):
            task.cancel()
        if self._clients:
            await asyncio.gather(*self._clients, return_exceptions=True)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._clients.add(task)
        try:
            await self._serve_connection(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away; nothing to answer
        except asyncio.CancelledError:
            pass  # stop(): end quietly (asyncio logs handler tasks that end cancelled)
        except h11.ProtocolError as error:
            logger.debug("control connection dropped: %s", error)
        finally:
            self._clients.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _serve_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = h11.Connection(h11.SERVER)
        while True:
            event = await _next_event(conn, reader)
            if not isinstance(event, h11.Request):
                return  # connection closed (or a protocol state we do not continue from)
            try:
                body = await _read_body(conn, reader)
            except RequestTooLarge:
                detail = f"request body over {MAX_BODY} bytes"
                reply = json_reply(413, {"error": "too_large", "detail": detail})
                await _send(conn, writer, reply, keep_alive=False)
                return
            except h11.RemoteProtocolError:
                return
            headers = {
                name.decode("latin-1").lower(): value.decode("latin-1") for name, value in event.headers
            }
            reply = handle_request(
                self.ctx,
                event.method.decode("ascii", "replace"),
                event.target.decode("latin-1"),
                body,
                caller=unquote(headers[CALLER_HEADER.lower()]) if CALLER_HEADER.lower() in headers else None,
                last_event_id=headers.get("last-event-id"),
                authorization=headers.get("authorization"),
                headers=headers,
            )
            if reply.stream_session is not None:
                await self._stream(conn, reader, writer, reply)
                return
            await _send(conn, writer, reply, keep_alive=True)
            if conn.our_state is h11.MUST_CLOSE or conn.their_state is h11.MUST_CLOSE:
                return
            conn.start_next_cycle()

    async def _stream(
        self, conn: h11.Connection, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, reply: Reply
    ) -> None:
        """Send the stream's opening, then every notice of the session as it happens."""
        session = reply.stream_session
        assert session is not None
        queue: asyncio.Queue[tuple[str, dict[str, Any]]] = asyncio.Queue(STREAM_BACKLOG)
        overflowed = False

        def listener(kind: str, payload: dict[str, Any]) -> None:
            nonlocal overflowed
            try:
                queue.put_nowait((kind, payload))
            except asyncio.QueueFull:
                overflowed = True

        # Subscribing before the first await: no event can fall between the opening and the live part.
        session.listeners.append(listener)
        finished = session.result is not None
        hang_up = asyncio.ensure_future(_wait_for_hang_up(reader))
        try:
            head = _response_head(reply, keep_alive=False)
            writer.write(_encode(conn, head) + _encode(conn, h11.Data(data=reply.body)))
            await writer.drain()
            while not finished and not overflowed:
                getter = asyncio.ensure_future(queue.get())
                done, _ = await asyncio.wait(
                    {getter, hang_up}, timeout=HEARTBEAT_SECONDS, return_when=asyncio.FIRST_COMPLETED
                )
                if hang_up in done:
                    getter.cancel()
                    return
                if getter not in done:
                    getter.cancel()
                    writer.write(_encode(conn, h11.Data(data=b": keepalive\n\n")))
                    await writer.drain()
                    continue
                kind, payload = getter.result()
                writer.write(_encode(conn, h11.Data(data=_notice_message(kind, payload))))
                await writer.drain()
                finished = kind == "finished"
            writer.write(_encode(conn, h11.EndOfMessage()))
            await writer.drain()
        finally:
            hang_up.cancel()
            if listener in session.listeners:
                session.listeners.remove(listener)


def _notice_message(kind: str, payload: dict[str, Any]) -> bytes:
    if kind == "event":
        return sse_message(payload, event_id=payload["index"])
    return sse_message(payload, event=kind)


async def _wait_for_hang_up(reader: asyncio.StreamReader) -> None:
    """Return when the client closes its side (a stream client sends nothing more)."""
    while await reader.read(4096):
        pass


async def _next_event(conn: h11.Connection, reader: asyncio.StreamReader) -> Any:
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            conn.receive_data(await reader.read(65536))
            continue
        return event


async def _read_body(conn: h11.Connection, reader: asyncio.StreamReader) -> bytes:
    """The request body; RequestTooLarge once it is read (and dropped) past `MAX_BODY`."""
    body = bytearray()
    size = 0
    while True:
        event = await _next_event(conn, reader)
        if isinstance(event, h11.Data):
            size += len(event.data)
            if size <= MAX_BODY:
                body += event.data
            elif size > DISCARD_LIMIT:
                raise RequestTooLarge()
            else:
                body.clear()  # keep reading so the client gets to read the 413
        elif isinstance(event, h11.EndOfMessage):
            if size > MAX_BODY:
                raise RequestTooLarge()
            return bytes(body)
        else:
            raise h11.RemoteProtocolError("connection closed inside a request body")


def _response_head(reply: Reply, *, keep_alive: bool) -> h11.Response:
    headers = [
        ("Content-Type", reply.content_type),
        SERVER_HEADER,
        *SAFETY_HEADERS,
        *reply.headers,
    ]
    if reply.stream_session is None and reply.status != 204:  # a 204 carries no Content-Length
        headers.append(("Content-Length", str(len(reply.body))))
    if not keep_alive:
        headers.append(("Connection", "close"))
    return h11.Response(status_code=reply.status, headers=headers, reason=HTTPStatus(reply.status).phrase)


def _encode(conn: h11.Connection, event: Any) -> bytes:
    return conn.send(event) or b""


async def _send(
    conn: h11.Connection, writer: asyncio.StreamWriter, reply: Reply, *, keep_alive: bool
) -> None:
    data = _encode(conn, _response_head(reply, keep_alive=keep_alive))
    if reply.body:
        data += _encode(conn, h11.Data(data=reply.body))
    data += _encode(conn, h11.EndOfMessage())
    writer.write(data)
    await writer.drain()
