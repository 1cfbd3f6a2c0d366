"""Upstream servers that misbehave on purpose, on 127.0.0.1, for the fault tests.

One raw TCP server answers by request path, so each fault is exact down to the
byte: a hang, a reset in the middle of a body, a response that is not HTTP,
a broken chunked encoding, a 5xx. A second server speaks TLS with a
certificate nobody trusts. Everything runs in daemon threads and stops with
the context manager.
"""

from __future__ import annotations

import json
import socket
import ssl
import struct
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.site.certs import make_self_signed

TLS_HANDSHAKE = b"\x16\x03"
"""How a TLS ClientHello record starts."""

HANG_LIMIT = 30.0
"""Longest a hanging answer holds its connection (the test client gives up long before)."""


def _reset(conn: socket.socket) -> None:
    """Close with a TCP RST instead of a FIN (SO_LINGER with a zero timeout)."""
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.close()


def _response(status: str, body: bytes, content_type: str = "application/json", extra: str = "") -> bytes:
    head = f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n{extra}"
    return head.encode("latin-1") + b"Connection: close\r\n\r\n" + body


Behaviour = Callable[[socket.socket, bytes], None]


def _send(data: bytes) -> Behaviour:
    def behave(conn: socket.socket, _request: bytes) -> None:
        conn.sendall(data)
        conn.close()

    return behave


def _ok(conn: socket.socket, request: bytes) -> None:
    _head, _, body = request.partition(b"\r\n\r\n")
    answer = json.dumps({"ok": True, "received": len(body)}).encode()
    conn.sendall(_response("200 OK", answer))
    conn.close()


def _hang(stop: threading.Event) -> Behaviour:
    def behave(conn: socket.socket, _request: bytes) -> None:
        stop.wait(HANG_LIMIT)
        conn.close()

    return behave


def _reset_mid_body(conn: socket.socket, _request: bytes) -> None:
    conn.sendall(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n" + b"[1," * 30
    )
    _reset(conn)


def _reset_before_answer(conn: socket.socket, _request: bytes) -> None:
    _reset(conn)


def behaviours(stop: threading.Event) -> dict[str, Behaviour]:
    return {
        "/ok": _ok,
        "/hang": _hang(stop),
        "/reset-mid-body": _reset_mid_body,
        "/reset-before-answer": _reset_before_answer,
        "/close-silently": _send(b""),
        "/not-http": _send(b"this is not HTTP at all\r\n\r\n"),
        "/bad-status-line": _send(b"HTTP/1.1 abc Weird\r\nContent-Length: 0\r\n\r\n"),
        "/header-without-colon": _send(b"HTTP/1.1 200 OK\r\nNoColonHere\r\nContent-Length: 2\r\n\r\nok"),
        "/bad-chunked": _send(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n"
        ),
        "/bad-content-length": _send(b"HTTP/1.1 200 OK\r\nContent-Length: twelve\r\n\r\nhello"),
        "/500": _send(_response("500 Internal Server Error", b'{"error": "boom"}')),
        "/503": _send(_response("503 Service Unavailable", b"down for maintenance", "text/html")),
        "/bad-gzip-response": _send(
            _response("200 OK", b'{"not": "gzip"}', extra="Content-Encoding: gzip\r\n")
        ),
        "/unknown-charset-response": _send(
            _response("200 OK", b'{"name": "caf\xe9"}', "application/json; charset=klingon")
        ),
        "/bad-json-response": _send(_response("200 OK", b'{"cart": [1, 2', "application/json")),
    }


def _read_request(conn: socket.socket) -> bytes:
    """The request head and as much of the body as Content-Length announces (bounded)."""
    conn.settimeout(10)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return data
        data += chunk
        if data.startswith(TLS_HANDSHAKE):
            return data  # a TLS hello to a plain HTTP port: answered like real servers do, with a 400
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length" and value.strip().isdigit():
            length = int(value)
    while len(body) < min(length, 20_000_000):
        chunk = conn.recv(65536)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


@dataclass
class FaultyUpstream:
    http_base: str
    tls_base: str
    """HTTPS with a self-signed certificate: a proxy that verifies upstream refuses it."""
    closed_port: int
    """Nothing listens here: connection refused."""


def _serve(listener: socket.socket, stop: threading.Event, handle: Callable[[socket.socket], None]) -> None:
    listener.settimeout(0.2)
    while not stop.is_set():
        try:
            conn, _ = listener.accept()
        except (TimeoutError, OSError):
            continue
        threading.Thread(target=handle, args=(conn,), daemon=True).start()


@contextmanager
def run_faulty_upstream(workdir: Path) -> Iterator[FaultyUpstream]:
    stop = threading.Event()
    table = behaviours(stop)

    def handle(conn: socket.socket) -> None:
        try:
            request = _read_request(conn)
            if request.startswith(TLS_HANDSHAKE):
                _send(_response("400 Bad Request", b"plain HTTP here", "text/plain"))(conn, request)
                return
            path = request.split(b" ", 2)[1].decode("latin-1") if request.count(b" ") >= 2 else "/"
            table.get(path.split("?")[0], _ok)(conn, request)
        except OSError:
            conn.close()

    def handle_tls(conn: socket.socket) -> None:
        try:
            with context.wrap_socket(conn, server_side=True) as secure:
                handle(secure)
        except (OSError, ssl.SSLError):
            conn.close()

    files = make_self_signed(workdir)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(files.cert, files.key)
    listeners = []
    for target in (handle, handle_tls):
        listener = socket.create_server(("127.0.0.1", 0))
        listeners.append(listener)
        threading.Thread(target=_serve, args=(listener, stop, target), daemon=True).start()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    try:
        yield FaultyUpstream(
            http_base=f"http://127.0.0.1:{listeners[0].getsockname()[1]}",
            tls_base=f"https://127.0.0.1:{listeners[1].getsockname()[1]}",
            closed_port=closed_port,
        )
    finally:
        stop.set()
        for listener in listeners:
            listener.close()
