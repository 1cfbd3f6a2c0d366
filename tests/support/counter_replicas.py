"""Replicas of a tiny site with one number in it, for the pool's end-to-end tests: a GET shows the
number, any POST adds one, and each replica has a reset endpoint in the environment-control shape
(`reset_endpoint.py`) that really puts the number back to 0. Real HTTP servers on 127.0.0.1; the test
reads a replica's number directly (`Counter.value`), not through the proxy."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.support.reset_endpoint import ResetEndpoint, reset_endpoints

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

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: CounterSite

    def do_GET(self) -> None:
        self._answer()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.value += 1
        self.server.posts += 1
        self._answer()

    def _answer(self) -> None:
        self.server.requests += 1
        body = f"<!doctype html><title>counter</title><p id=n>{self.server.value}</p>".encode()
        self.send_response(200)
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


@contextmanager
def counters(count: int, *, delay: float = 0.0) -> Iterator[list[Counter]]:
    """`count` replicas, each with its reset endpoint (a reset takes `delay` seconds)."""
    with ExitStack() as stack:
        sites = [CounterSite() for _ in range(count)]
        for site in sites:
            threading.Thread(target=site.serve_forever, daemon=True).start()
            stack.callback(site.server_close)
            stack.callback(site.shutdown)
        endpoints = stack.enter_context(reset_endpoints(count, delay=delay))
        for site, endpoint in zip(sites, endpoints, strict=True):
            endpoint.on_reset = lambda site=site: setattr(site, "value", 0)
        yield [Counter(site, endpoint) for site, endpoint in zip(sites, endpoints, strict=True)]


def counter_config(path: Path, replicas: list[Counter]) -> Path:
    """The site map: `__SHOPPING__` on the counters, each with its reset endpoint."""
    entries = [{"urls": [r.url], "reset_url": r.reset.url} for r in replicas]
    path.write_text(json.dumps({"environments": {"__SHOPPING__": {"replicas": entries}}}), encoding="utf-8")
    return path
