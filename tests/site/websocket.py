"""A WebSocket echo endpoint for the test site, on top of `http.server`.

The upgrade handshake is a few header lines (RFC 6455 §4.2.2); the framing
is left to `wsproto`, which mitmproxy already depends on.
"""

from __future__ import annotations

import base64
import hashlib
from http.server import BaseHTTPRequestHandler

from wsproto.connection import Connection, ConnectionType
from wsproto.events import CloseConnection, Message, Ping, TextMessage

_HANDSHAKE_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"  # fixed by RFC 6455


def accept_key(client_key: str) -> str:
    digest = hashlib.sha1((client_key + _HANDSHAKE_GUID).encode(), usedforsecurity=False).digest()
    return base64.b64encode(digest).decode()


def serve_echo(handler: BaseHTTPRequestHandler) -> None:
    """Upgrade the handler's connection and echo text messages ("echo: <text>") until closed."""
    key = handler.headers.get("Sec-WebSocket-Key")
    if not key or (handler.headers.get("Upgrade") or "").lower() != "websocket":
        handler.send_error(400, "expected a WebSocket upgrade")
        return
    handler.send_response(101)
    handler.send_header("Upgrade", "websocket")
    handler.send_header("Connection", "Upgrade")
    handler.send_header("Sec-WebSocket-Accept", accept_key(key))
    handler.end_headers()
    handler.wfile.flush()
    handler.close_connection = True  # the socket is the WebSocket's from now on
    socket = handler.connection
    ws = Connection(ConnectionType.SERVER)
    while True:
        data = handler.rfile.read1(65536)  # read1: also bytes already buffered by the handler
        if not data:
            return
        ws.receive_data(data)
        for event in ws.events():
            if isinstance(event, TextMessage):
                socket.sendall(ws.send(Message(data=f"echo: {event.data}")))
            elif isinstance(event, Ping):
                socket.sendall(ws.send(event.response()))
            elif isinstance(event, CloseConnection):
                socket.sendall(ws.send(event.response()))
                return
