"""The control port: uvicorn serving the control app as a task of mitmproxy's own event loop.

In the proxy's loop, the routes touch the sessions from the same thread as
capture does (no locks), and an event captured in mitmproxy's `response` hook
reaches stream subscribers without a thread hop. The socket is bound here and
handed to uvicorn, so port 0 works and the real port is known before the
banner is printed. The host process (`webarena-live serve`, mitmdump) owns
SIGINT and SIGTERM: uvicorn's own signal handling is switched off.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Iterator

import uvicorn
from fastapi import FastAPI

from webarena_live.addresses.listeners import kept_listeners

logger = logging.getLogger(__name__)

STOP_SECONDS = 2.0
"""How long stopping waits for open connections before uvicorn cancels them."""
KEEP_ALIVE_SECONDS = 30
"""How long an idle client connection to the control port stays open."""
MAX_HEAD = 1024 * 1024
"""Largest request head the control port reads: a fleet's front carries a finish's interference in one
(compressed), so more than h11's default 16 KiB; a body may be larger still (`MAX_CONTROL_BODY`)."""


def listening_socket(host: str, port: int, family: socket.AddressFamily) -> socket.socket:
    """A listening TCP socket created with its protocol named (`IPPROTO_TCP`): asyncio sets
    TCP_NODELAY only on accepted sockets whose protocol says TCP, and `socket.create_server` leaves it
    0. Without it, a response written in two parts on a kept-alive connection waits for the client's
    delayed ACK (about 40 ms per request)."""
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen()
    except OSError:
        sock.close()
        raise
    return sock


class _GuestServer(uvicorn.Server):
    """uvicorn without its signal handlers: it is a guest in the host's process and loop."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class ControlServer:
    """Serves `app` on `host:port`; `start()` binds (OSError when it cannot), `stop()` closes everything."""

    def __init__(self, app: FastAPI, *, host: str, port: int) -> None:
        self.app = app
        self.host = host
        self.port = port
        self._server: _GuestServer | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        kept = kept_listeners() if self.port else None  # a worker of `serve --workers` (its parent keeps it)
        sock = kept.take(self.port) if kept is not None else None
        if sock is None:
            family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
            sock = listening_socket(self.host, self.port, family)
            if kept is not None:
                kept.hold(sock)
        sock.setblocking(False)
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            self.app,
            http="h11",
            ws="none",
            lifespan="off",
            log_config=None,
            access_log=False,
            server_header=False,  # the app names itself (middleware.CommonHeaders)
            # Longer than clients keep an idle connection (httpx: 5 s, uvicorn's own default): with equal
            # times the server may close a connection just as a client sends on it (a ReadError).
            timeout_keep_alive=KEEP_ALIVE_SECONDS,
            timeout_graceful_shutdown=int(STOP_SECONDS),
            # A request head may hold what a fleet's front carries (the interference of a finish,
            # compressed): as large as a body may be, not h11's default 16 KiB.
            h11_max_incomplete_event_size=MAX_HEAD,
        )
        server = _GuestServer(config)
        self._server = server
        self._task = asyncio.get_running_loop().create_task(server.serve(sockets=[sock]))
        while not server.started:
            if self._task.done():
                self._task.result()  # raises what stopped it
                raise OSError("the control server stopped while starting")
            await asyncio.sleep(0.005)

    async def stop(self) -> None:
        server, task = self._server, self._task
        self._server = self._task = None
        if server is None or task is None:
            return
        self.app.state.streams.close_all()  # event streams never end on their own
        server.should_exit = True
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await asyncio.wait_for(task, STOP_SECONDS + 1)
