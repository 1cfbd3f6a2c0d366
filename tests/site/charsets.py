# ruff: noqa: RUF001  (the en dash and other non-ASCII text are what is tested)
"""A small site whose forms are submitted with non-ASCII text, from pages in several charsets.

`GET /page/<charset>` is a page served as `text/html; charset=<charset>` holding one form of
each kind a browser submits — `application/x-www-form-urlencoded`, `multipart/form-data`
(without and with a file part) and `text/plain` — and a script that posts JSON with `fetch()`.
Every POST is answered with a small UTF-8 page (forms) or JSON (scripts), and its exact bytes
are kept in `CharsetSite.received`, so a test can compare what the browser sent with what a
proxy and the browser's own HAR recorded.
"""

from __future__ import annotations

import html
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

FIELDS = {
    "message": "six entries – see the table",
    "name": "Crème brûlée, naïve café",
    "city": "東京タワー",
    "note": "thanks 🙂",
}
"""What the agent types into every form: an en dash, accented letters, CJK, an emoji."""

FORM_KINDS = {
    "urlencoded": "application/x-www-form-urlencoded",
    "multipart": "multipart/form-data",
    "upload": "multipart/form-data",  # the same form with a file part
    "plain": "text/plain",
}

UPLOAD = bytes(range(256)) + b"\x89PNG\r\n\x1a\n\xff\xfe\x00"
"""The file the `upload` form attaches: every byte value, so it is never valid UTF-8."""


def page(charset: str) -> bytes:
    forms = []
    for kind, enctype in FORM_KINDS.items():
        inputs = "".join(f'<input name="{name}" id="{kind}-{name}">' for name in FIELDS)
        if kind == "upload":
            inputs += f'<input type="file" name="attachment" id="{kind}-file">'
        forms.append(
            f'<form id="{kind}" method="post" action="/submit/{charset}/{kind}" enctype="{enctype}">'
            f'{inputs}<button id="{kind}-send" type="submit">Send</button></form>'
        )
    text = (
        f'<!doctype html><html><head><meta charset="{html.escape(charset)}"><title>{charset}</title>'
        f"</head><body>{''.join(forms)}</body></html>"
    )
    return text.encode(charset)


@dataclass(frozen=True)
class Received:
    path: str
    content_type: str
    body: bytes


@dataclass
class CharsetSite:
    base: str
    received: list[Received] = field(default_factory=list)

    def posted(self, path: str) -> Received:
        """The last request received on `path`."""
        matches = [item for item in self.received if item.path == path]
        assert matches, f"the site received no POST {path}; it got {[item.path for item in self.received]}"
        return matches[-1]


def _handler(site: CharsetSite) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            pass

        def _send(self, body: bytes, content_type: str) -> None:
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path.startswith("/page/"):
                charset = self.path.removeprefix("/page/")
                self._send(page(charset), f"text/html; charset={charset}")
            else:
                self._send(b"<!doctype html><title>here</title>", "text/html; charset=utf-8")

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            site.received.append(Received(self.path, self.headers.get("Content-Type") or "", body))
            if self.path.startswith("/submit/"):
                self._send(b"<!doctype html><title>thanks</title><p>received", "text/html; charset=utf-8")
            else:
                self._send(json.dumps({"received": len(body)}).encode(), "application/json")

    return Handler


@contextmanager
def run_charset_site() -> Iterator[CharsetSite]:
    site = CharsetSite("")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(site))
    server.daemon_threads = True
    site.base = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, name="charset-site", daemon=True)
    thread.start()
    try:
        yield site
    finally:
        server.shutdown()
        server.server_close()
