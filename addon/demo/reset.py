"""The Demo Shop's environment-control endpoint: `POST /reset` brings a shop back to its seeded state.

The shape of the official WebArena environment-control server's reset: a JSON answer whose `success`
says whether it worked, so a site map can name it as a replica's `reset_url`:

    python -m webarena_live.demo.site --port 7771 --reset-port 8871
    {"__SHOPPING__": {"replicas": [{"urls": ["http://127.0.0.1:7771"],
                                    "reset_url": "http://127.0.0.1:8871/reset"}, ...]}}
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from webarena_live.demo.site import DemoShopServer


class ResetServer(ThreadingHTTPServer):
    """`POST /reset` on its own port: `on_reset()` brings the site back; `GET /reset` tells how many."""

    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        on_reset: Callable[[], None],
        handler: type[ResetHandler] | None = None,
    ) -> None:
        super().__init__(address, handler or ResetHandler)
        self.on_reset = on_reset
        self.resets = 0

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}/reset"


class ResetHandler(BaseHTTPRequestHandler):
    server: ResetServer

    def do_POST(self) -> None:
        if self.path.split("?")[0] != "/reset":
            return self.answer(404, {"success": False, "message": f"no route {self.path}"})
        self.server.on_reset()
        self.server.resets += 1
        self.answer(200, {"success": True, "message": "the site is back to its seeded state"})

    def do_GET(self) -> None:
        self.answer(200, {"success": True, "resets": self.server.resets})

    def answer(self, status: int, document: dict[str, Any]) -> None:
        body = json.dumps(document).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def serve_reset(shop: DemoShopServer, host: str = "127.0.0.1", port: int = 0) -> ResetServer:
    """The reset endpoint of `shop` in a background thread (`port=0`: a free one)."""
    server = ResetServer((host, port), shop.reset)
    threading.Thread(target=server.serve_forever, name="demo-shop-reset", daemon=True).start()
    return server
