"""The shop over HTTPS that speaks HTTP/2 only, built on the `h2` protocol
library (a mitmproxy dependency).

mitmproxy offers a browser HTTP/2 only when the upstream server negotiates it
(it mirrors the server's ALPN choice), so this server is what makes the
Chromium <-> proxy leg of a test run over HTTP/2. It serves the same routes
as the HTTP/1.1 servers; bodies must fit the initial flow-control window
(64 KiB), which every page of the site does.
"""

from __future__ import annotations

import socket
import ssl
import threading
from pathlib import Path

from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.events import ConnectionTerminated, DataReceived, RequestReceived, StreamEnded

from tests.site.routes import Answer, answer_get, answer_post, compress_for, parse_cookies


class _Stream:
    def __init__(self, headers: dict[str, str]) -> None:
        self.headers = headers
        self.body = b""


def _answer(stream: _Stream) -> Answer:
    method = stream.headers.get(":method", "GET")
    target = stream.headers.get(":path", "/")
    if method == "POST":
        return answer_post(target, stream.headers.get("content-type", ""), stream.body)
    if method == "GET":
        return answer_get(target, parse_cookies(stream.headers.get("cookie")))
    return Answer(405)


def _respond(connection: H2Connection, stream_id: int, answer: Answer) -> None:
    headers = [(":status", str(answer.status)), ("content-length", str(len(answer.body)))]
    if answer.content_type:
        headers.append(("content-type", answer.content_type))
    headers += [(name.lower(), value) for name, value in answer.headers]
    connection.send_headers(stream_id, headers, end_stream=not answer.body)
    body = answer.body
    frame = connection.max_outbound_frame_size
    while body:
        chunk, body = body[:frame], body[frame:]
        connection.send_data(stream_id, chunk, end_stream=not body)


def _serve_connection(raw: socket.socket, tls: ssl.SSLContext) -> None:
    try:
        sock = tls.wrap_socket(raw, server_side=True)
    except (OSError, ssl.SSLError):
        raw.close()
        return
    connection = H2Connection(H2Configuration(client_side=False, header_encoding="utf-8"))
    connection.initiate_connection()
    streams: dict[int, _Stream] = {}
    with sock:
        try:
            sock.sendall(connection.data_to_send())
            while data := sock.recv(65536):
                for event in connection.receive_data(data):
                    if isinstance(event, RequestReceived):
                        streams[event.stream_id] = _Stream(dict(event.headers))
                    elif isinstance(event, DataReceived):
                        streams[event.stream_id].body += event.data
                        connection.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                    elif isinstance(event, StreamEnded):
                        stream = streams.pop(event.stream_id)
                        answer = compress_for(_answer(stream), stream.headers.get("accept-encoding"))
                        _respond(connection, event.stream_id, answer)
                    elif isinstance(event, ConnectionTerminated):
                        return
                sock.sendall(connection.data_to_send())
        except (OSError, ssl.SSLError):
            return


class Http2Server:
    """Accepts TLS connections that negotiate `h2` and serves each on its own thread."""

    def __init__(self, cert: Path, key: Path) -> None:
        self.tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.tls.load_cert_chain(cert, key)
        self.tls.set_alpn_protocols(["h2"])
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.base_url = f"https://127.0.0.1:{self.listener.getsockname()[1]}"
        self._thread = threading.Thread(target=self._accept, name="test-site-h2", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                raw, _ = self.listener.accept()
            except OSError:  # the listener was closed: stop
                return
            threading.Thread(target=_serve_connection, args=(raw, self.tls), daemon=True).start()

    def stop(self) -> None:
        self.listener.close()
