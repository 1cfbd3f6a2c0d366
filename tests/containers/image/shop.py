"""The site of the test image: a shop whose whole state is one JSON file in the container's writable layer.

Shaped like an official WebArena-Verified site where it matters to a pool of copies: the state lives in the
container (a new container from the image starts from the seeded state, a restarted process does not),
the health path is the official one (the reference's container configuration: `/customer/account/login`
for the shop, `/login` for the forum), and the page's links are built from `WA_ENV_CTRL_EXTERNAL_SITE_URL`
as the official images rewrite their base URL to it, so a copy's links point at the copy itself.

Stdlib only: the image holds Debian's python3 and nothing else.

    GET  /                         HTML: the orders, links made from WA_ENV_CTRL_EXTERNAL_SITE_URL
    GET  /customer/account/login   200 (the shop's health path); /login too (the forum's)
    GET  /orders                   {"orders": [...]}
    POST /order                    form field `name` (or a JSON body {"name": ...}): appended;
                                   200 {"orders": [...]}
    GET  /whoami                   {"hostname", "pid", "started", "supervisor_pid", "supervisor_started"}

Environment: SITE_PORT (80), SITE_DATA_DIR (/var/lib/site, where orders.json is), SITE_START_DELAY (seconds
slept before listening, 0: a Magento-like slow start), WA_ENV_CTRL_EXTERNAL_SITE_URL.
"""

from __future__ import annotations

import html
import json
import os
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

STARTED = time.time()
DATA = Path(os.environ.get("SITE_DATA_DIR") or "/var/lib/site") / "orders.json"
HEALTH_PATHS = {"/customer/account/login", "/login"}
_lock = threading.Lock()  # one writer at a time: a read-modify-write of the file


def read_orders() -> list[str]:
    return list(json.loads(DATA.read_text())["orders"])


def add_order(name: str) -> list[str]:
    with _lock:
        orders = [*read_orders(), name]
        partial = DATA.with_suffix(".json.partial")
        with partial.open("w") as out:  # written whole, then renamed: a kill mid-write loses nothing
            json.dump({"orders": orders}, out)
            out.flush()
            os.fsync(out.fileno())
        partial.replace(DATA)
        return orders


def external(path: str) -> str:
    base = os.environ.get("WA_ENV_CTRL_EXTERNAL_SITE_URL", "").rstrip("/")
    return f"{base}{path}"


def page() -> str:
    items = "".join(f"<li>{html.escape(order)}</li>" for order in read_orders())
    return (
        "<!doctype html><html><head><title>Test shop</title></head><body><h1>Orders</h1>"
        f'<ul id="orders">{items}</ul>'
        f'<form method="post" action="{html.escape(external("/order"))}">'
        '<input name="name"><button type="submit">Order</button></form>'
        f'<p><a href="{html.escape(external("/orders"))}">orders as JSON</a> '
        f'<a href="{html.escape(external("/customer/account/login"))}">sign in</a></p></body></html>'
    )


class Handler(BaseHTTPRequestHandler):
    server_version = "webarena-live-test-shop/1"

    def log_message(self, format: str, *args: Any) -> None:
        sys.stderr.write(f"shop: {self.address_string()} {format % args}\n")

    def _send(self, status: int, body: str, content_type: str) -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _json(self, status: int, value: Any) -> None:
        self._send(status, json.dumps(value), "application/json")

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        if path == "/":
            self._send(200, page(), "text/html; charset=utf-8")
        elif path in HEALTH_PATHS:
            self._send(
                200, "<!doctype html><title>Sign in</title><form><input name=login></form>", "text/html"
            )
        elif path == "/orders":
            self._json(200, {"orders": read_orders()})
        elif path == "/whoami":
            supervisor_started = float(os.environ.get("SUPERVISOR_STARTED") or 0)
            self._json(200, {
                "hostname": socket.gethostname(), "pid": os.getpid(), "started": STARTED,
                "supervisor_pid": os.getppid(), "supervisor_started": supervisor_started,
            })  # fmt: skip
        else:
            self._json(404, {"error": "not found", "path": path})

    def do_POST(self) -> None:
        path = urlsplit(self.path).path
        if path != "/order":
            self._json(404, {"error": "not found", "path": path})
            return
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode("utf-8", "replace")
        if (self.headers.get("Content-Type") or "").startswith("application/json"):
            try:
                name = json.loads(body).get("name")
            except (ValueError, AttributeError):
                name = None
        else:
            name = (parse_qs(body).get("name") or [None])[0]
        if not isinstance(name, str) or not name.strip():
            self._json(400, {"error": "an order needs a non-empty `name` (form field or JSON)"})
            return
        self._json(200, {"orders": add_order(name.strip())})


def main() -> None:
    # Killed at once by SIGTERM (its default action) while it sleeps; while it serves, SIGTERM ends
    # serve_forever so the process exits 0 and the supervisor sees a clean stop.
    time.sleep(float(os.environ.get("SITE_START_DELAY") or 0))
    server = ThreadingHTTPServer(("0.0.0.0", int(os.environ.get("SITE_PORT") or 80)), Handler)
    server.daemon_threads = True
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    print(f"shop: serving {DATA} on port {server.server_address[1]}", file=sys.stderr, flush=True)
    server.serve_forever(poll_interval=0.1)  # a quick stop: shutdown() waits for the next poll
    server.server_close()


if __name__ == "__main__":
    main()
