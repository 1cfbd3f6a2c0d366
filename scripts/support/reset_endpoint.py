"""A reset endpoint in the environment-control server's shape, on 127.0.0.1, that a test steers:
it succeeds, answers 500, reports `{"success": false}`, or hangs; it counts the resets it was asked for
and runs a callback (restoring a site's seeded data) on each one that succeeds."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from webarena_live.demo.reset import ResetHandler, ResetServer


class ResetEndpoint(ResetServer):
    def __init__(self, on_reset: Callable[[], None] | None = None, *, delay: float = 0.0) -> None:
        super().__init__(("127.0.0.1", 0), on_reset or (lambda: None), _Handler)
        self.delay = delay
        """Seconds each successful reset takes (standing for a container restart)."""
        self.mode = "ok"
        """`ok`, `error` (500), `refuse` (`{"success": false}`) or `hang` (no answer for a minute)."""
        self.calls = 0
        self.done = 0


class _Handler(ResetHandler):
    server: ResetEndpoint

    def do_POST(self) -> None:
        server = self.server
        server.calls += 1
        if server.mode == "hang":
            time.sleep(60)
            return
        if server.mode == "error":
            return self.answer(500, {"detail": "the container did not come back"})
        if server.mode == "refuse":
            return self.answer(200, {"success": False, "message": "restore failed"})
        time.sleep(server.delay)
        server.on_reset()
        server.done += 1
        self.answer(200, {"success": True, "message": "reset"})


@contextmanager
def reset_endpoints(count: int, **options: Any) -> Iterator[list[ResetEndpoint]]:
    endpoints = [ResetEndpoint(**options) for _ in range(count)]
    for endpoint in endpoints:
        threading.Thread(target=endpoint.serve_forever, daemon=True).start()
    try:
        yield endpoints
    finally:
        for endpoint in endpoints:
            endpoint.shutdown()
            endpoint.server_close()
