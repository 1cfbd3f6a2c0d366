"""Replicas of a tiny site with one number in it, for the pool's end-to-end tests: a GET shows the
number, any POST adds one, and each replica has a reset endpoint in the environment-control shape
(`reset_endpoint.py`) that really puts the number back to 0. Real HTTP servers on 127.0.0.1; the test
reads a replica's number directly (`Counter.value`), not through the proxy. A site can be made to fail as
a broken copy does: `broken` answers 500 to everything, `stop` refuses connections until `start` listens
again on the same port; its reset endpoint may repair it or not (`Counter.repairs_on_reset`)."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from scripts.support.reset_endpoint import ResetEndpoint, reset_endpoints

DEMO_TASKS = Path(__file__).resolve().parents[2] / "tasks" / "demo.json"
"""The demo tasks: all on `__SHOPPING__`; 1001 and 1002 read, 1004 and 1005 change the site."""
READ, READ_TOO, MUTATE, MUTATE_TOO = 1001, 1002, 1004, 1005


class CounterSite(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.value = 0
        self.requests = 0
        self.posts = 0
        """Every POST that reached it (a reset puts `value` back, never this)."""
        self.broken = False
        """Answer 500 to every request (an application broken everywhere), counting each."""
        self.failed = 0
        """The 500s it answered while broken."""
        self.running = False

    def start(self) -> None:
        """Serve (again, after `stop`, on the same port: the site map still names it)."""
        if self.socket.fileno() == -1:  # closed by `stop`: listen anew where it was
            self.socket = socket.socket(self.address_family, self.socket_type)
            self.server_bind()
            self.server_activate()
        self.running = True
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def stop(self) -> None:
        """Stop serving and close the listening socket: connections are refused until `start`."""
        if self.running:
            self.shutdown()
        self.server_close()
        self.running = False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: CounterSite

    def do_GET(self) -> None:
        self._answer()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.value += 0 if self.server.broken else 1
        self.server.posts += 1
        self._answer()

    def _answer(self) -> None:
        self.server.requests += 1
        if self.server.broken:
            self.server.failed += 1
            return self._broken()
        body = f"<!doctype html><title>counter</title><p id=n>{self.server.value}</p>".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _broken(self) -> None:
        body = b"<!doctype html><title>500</title><h1>Internal Server Error</h1>"
        self.send_response(500)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@dataclass
class Counter:
    site: CounterSite
    reset: ResetEndpoint

    @property
    def url(self) -> str:
        return self.site.url

    @property
    def value(self) -> int:
        return self.site.value

    def repairs_on_reset(self, repairs: bool) -> None:
        """Whether a successful reset also repairs the site (no longer broken, listening again), as a
        container restart does; without it the reset puts the number back and leaves the fault."""

        def reset() -> None:
            self.site.value = 0
            if repairs:
                self.site.broken = False
                if not self.site.running:
                    self.site.start()

        self.reset.on_reset = reset


@contextmanager
def counters(count: int, *, delay: float = 0.0) -> Iterator[list[Counter]]:
    """`count` replicas, each with its reset endpoint (a reset takes `delay` seconds)."""
    with ExitStack() as stack:
        sites = [CounterSite() for _ in range(count)]
        for site in sites:
            site.start()
            stack.callback(site.stop)
        endpoints = stack.enter_context(reset_endpoints(count, delay=delay))
        made = [Counter(site, endpoint) for site, endpoint in zip(sites, endpoints, strict=True)]
        for counter in made:
            counter.repairs_on_reset(False)  # a reset puts the number back to 0
        yield made


def counter_config(path: Path, replicas: list[Counter], *, health_url: str | None = None) -> Path:
    """The site map: `__SHOPPING__` on the counters, each with its reset endpoint (and `health_url`)."""
    more = {"health_url": health_url} if health_url else {}
    entries = [{"urls": [r.url], "reset_url": r.reset.url, **more} for r in replicas]
    path.write_text(json.dumps({"environments": {"__SHOPPING__": {"replicas": entries}}}), encoding="utf-8")
    return path
