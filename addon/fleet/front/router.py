"""The shared proxy ports of `serve --workers N`: each connection joined to its session's worker.

`--port` and `--session-port` keep their meaning with workers: a client that names its session
with proxy credentials (or names none: session `default`) reaches the worker that owns it. The
router reads the connection's first request head, takes the session from its
`Proxy-Authorization`, and from then on only carries bytes between the client and that worker's
own port of the same kind, which does everything else (the 407s, the capture). On the session
port a first request without credentials gets the 407 here, with `Connection: close`, so the
client's retry with credentials opens a connection that can be routed.

One connection, one session: that is how browsers and HTTP clients use a proxy (a connection
pool per proxy identity). A session's own address (`POST /sessions` answers it) goes straight to
its worker and never passes here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Callable

from webarena_live.addresses.credentials import proxy_username
from webarena_live.addresses.placement import Placement, PlacementError
from webarena_live.runs.sessions import DEFAULT_SESSION

logger = logging.getLogger("webarena_live.fleet")

MAX_HEAD = 64 * 1024
CHUNK = 256 * 1024
_CREDENTIALS = re.compile(rb"^proxy-authorization:[ \t]*([^\r\n]*)\r?$", re.IGNORECASE | re.MULTILINE)

_CHALLENGE_BODY = b"407 Proxy Authentication Required: proxy credentials name the session\n"
CHALLENGE = (
    b"HTTP/1.1 407 Proxy Authentication Required\r\n"
    b'Proxy-Authenticate: Basic realm="webarena-live"\r\nContent-Type: text/plain; charset=utf-8\r\n'
    + f"Content-Length: {len(_CHALLENGE_BODY)}\r\nConnection: close\r\n\r\n".encode()
    + _CHALLENGE_BODY
)


def head_username(head: bytes) -> str | None:
    """The session a request head names with its proxy credentials (None: none)."""
    found = _CREDENTIALS.search(head)
    return proxy_username(found.group(1).decode("latin-1")) if found else None


def _unavailable(detail: str) -> bytes:
    body = f"503 Service Unavailable: {detail}\n".encode()
    return (
        b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nRetry-After: 1\r\n"
        + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
        + body
    )


class SharedPort:
    """One public proxy port; `worker_port(index)` is the same kind of port on worker `index`, as
    (host, port)."""

    def __init__(
        self, placement: Placement, worker_port: Callable[[int], tuple[str, int]], *, challenges: bool
    ) -> None:
        self.placement = placement
        self.worker_port = worker_port
        self.challenges = challenges
        self.server: asyncio.Server | None = None

    async def start(self, host: str, port: int) -> None:
        self.server = await asyncio.start_server(self.handle, host, port, limit=MAX_HEAD)

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.server.wait_closed(), 2)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                return
            name = head_username(head)
            if name is None and self.challenges:
                writer.write(CHALLENGE)
                await writer.drain()
                return
            try:
                seat = self.placement.place(name or DEFAULT_SESSION, address=False)
            except PlacementError as error:
                writer.write(_unavailable(str(error)))
                await writer.drain()
                return
            if seat.worker in self.placement.down:
                writer.write(_unavailable(f"worker {seat.worker} is restarting; retry in a moment"))
                await writer.drain()
                return
            try:
                up_reader, up_writer = await asyncio.open_connection(*self.worker_port(seat.worker))
            except OSError:
                writer.write(_unavailable(f"worker {seat.worker} is restarting; retry in a moment"))
                await writer.drain()
                return
            up_writer.write(head)
            await asyncio.gather(_carry(reader, up_writer), _carry(up_reader, writer))
        except ConnectionError:
            pass
        finally:
            writer.close()


async def _carry(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    """Bytes from `source` to `sink` until either side closes; then the other side is closed too."""
    try:
        while chunk := await source.read(CHUNK):
            sink.write(chunk)
            await sink.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        with contextlib.suppress(Exception):
            if sink.can_write_eof():
                sink.write_eof()
            else:
                sink.close()
