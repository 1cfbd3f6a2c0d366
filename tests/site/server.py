"""The test site's servers on 127.0.0.1, each on a free port picked by the OS.

The same routes (`routes.py`) are served as: the shop over HTTP/1.1, the shop
over HTTPS (HTTP/1.1), the shop over HTTPS with HTTP/2 only (`http2.py`), and
the forum as a second WebArena site. The HTTP/1.1 servers are the standard
library's; the WebSocket echo endpoint rides on them (`websocket.py`). Text
and JSON answers are gzipped for clients that accept it, like a production
server's (Chromium always does).
"""

from __future__ import annotations

import hashlib
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tests.site.certs import make_self_signed
from tests.site.http2 import Http2Server
from tests.site.routes import CATALOG_BYTES, Answer, answer_get, answer_post, compress_for, parse_cookies
from tests.site.websocket import serve_echo

__all__ = ["CATALOG_BYTES", "RunningSite", "run_site"]


class SiteHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like a real server behind the proxy
    server_version = "webarena-live-test-site/1"

    def log_message(self, format: str, *args: object) -> None:
        pass  # keep pytest output clean

    def _send(self, answer: Answer) -> None:
        answer = compress_for(answer, self.headers.get("Accept-Encoding"))
        self.send_response(answer.status)
        if answer.content_type:
            self.send_header("Content-Type", answer.content_type)
        self.send_header("Content-Length", str(len(answer.body)))
        for name, value in answer.headers:
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(answer.body)

    def do_GET(self) -> None:
        if self.path.split("?")[0] == "/ws/echo":
            serve_echo(self)
            return
        self._send(conditional(answer_get(self.path, parse_cookies(self.headers.get("Cookie"))),
                               self.headers.get("If-None-Match")))  # fmt: skip

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self._send(answer_post(self.path, self.headers.get("Content-Type") or "", body))


def conditional(answer: Answer, if_none_match: str | None) -> Answer:
    """A weak ETag on every 200 (a digest of the body, as Rails' Rack::ETag gives one), and `304 Not
    Modified` with no body when the browser revalidates a copy that is still current. With no
    Cache-Control the copy is stale at once, so a browser with its cache on revalidates on every
    revisit and reload (tests/support/threeway.py counts the 304s)."""
    if answer.status != 200 or any(name.lower() == "cache-control" for name, _ in answer.headers):
        return answer
    etag = 'W/"' + hashlib.sha1(answer.body).hexdigest()[:16] + '"'
    if if_none_match and etag in (tag.strip() for tag in if_none_match.split(",")):
        return Answer(304, b"", None, (("ETag", etag),), compressible=False)
    return replace(answer, headers=(*answer.headers, ("ETag", etag)))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


@dataclass(frozen=True)
class RunningSite:
    """Base URLs (no trailing slash) of the site's servers."""

    shop_http: str
    shop_https: str
    shop_h2: str
    forum_http: str

    def site_map(self) -> dict[str, dict[str, object]]:
        """The `environments` section of a reference-format config file."""
        return {
            "__SHOPPING__": {"urls": [self.shop_http, self.shop_https, self.shop_h2], "active_url_idx": 0},
            "__REDDIT__": {"urls": [self.forum_http], "active_url_idx": 0},
        }


def _serve(tls: ssl.SSLContext | None = None) -> tuple[_Server, str]:
    server = _Server(("127.0.0.1", 0), SiteHandler)
    if tls is not None:
        # Handshake lazily in the request thread, so one slow client cannot
        # stall the accept loop.
        server.socket = tls.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
    threading.Thread(target=server.serve_forever, name="test-site", daemon=True).start()
    scheme = "https" if tls else "http"
    return server, f"{scheme}://127.0.0.1:{server.server_address[1]}"


@contextmanager
def run_site(workdir: Path) -> Iterator[RunningSite]:
    """Serve the shop (HTTP, HTTPS, HTTPS with HTTP/2) and the forum until exit."""
    tls_files = make_self_signed(workdir)
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(tls_files.cert, tls_files.key)
    servers: list[_Server] = []
    h2 = Http2Server(tls_files.cert, tls_files.key)
    try:
        urls = []
        for server_tls in (None, tls, None):
            server, url = _serve(server_tls)
            servers.append(server)
            urls.append(url)
        h2.start()
        shop, shop_tls, forum = urls
        yield RunningSite(shop_http=shop, shop_https=shop_tls, shop_h2=h2.base_url, forum_http=forum)
    finally:
        h2.stop()
        for server in servers:
            server.shutdown()
            server.server_close()
