"""Listening sockets that outlive the process listening on them, as pre-fork servers keep theirs.

A worker of `serve --workers` (a `webarena-live serve` child) hands a copy of every listening socket
it opens to its parent (the front, or the Ray actor on its node) over a Unix socket pair, and takes
it back when it is started again: while no worker runs, the kernel still accepts connections on the
port into its backlog, and the next worker accepts them. An agent's connection during a restart
waits instead of being refused. A listener closed for good (a session's address released) is
dropped by the parent too.

`ListenerKeeper` is the parent's side (one per worker, across its restarts); `kept_listeners()` is
the child's, found through the `KEEPER_ENV` environment variable. Linux and other Unixes only
(SCM_RIGHTS); where there is none the worker simply listens on its own.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
from functools import cache

logger = logging.getLogger(__name__)

KEEPER_ENV = "WEBARENA_LIVE_LISTENER_KEEPER"
"""The file descriptor number of the child's end of its channel to the parent that keeps its listeners."""
TAKE_DEADLINE = 5.0
_MESSAGE = 64


class ListenerKeeper:
    """The parent's side: the listening sockets of one worker by port, kept across its restarts."""

    def __init__(self) -> None:
        self.held: dict[int, socket.socket] = {}
        self._lock = threading.Lock()
        self._channel: socket.socket | None = None
        self._reader: threading.Thread | None = None

    def channel(self) -> tuple[socket.socket, dict[str, str]]:
        """The child's end of a new channel, for the worker about to start, and the environment that
        names it (pass the descriptor, then close it here); the previous worker's channel is closed."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with self._lock:
            old, self._channel = self._channel, ours
        if old is not None:
            old.close()
        reader = threading.Thread(target=self._serve, args=(ours,), daemon=True, name="listener-keeper")
        with self._lock:
            self._reader = reader
        reader.start()
        return theirs, {KEEPER_ENV: str(theirs.fileno())}

    def settle(self, timeout: float = TAKE_DEADLINE) -> None:
        """Wait until the messages of the last worker, gone now, are all handled (its reader ends with
        them): what it held is then in `held`, to keep or drop."""
        with self._lock:
            reader = self._reader
        if reader is None:
            return
        reader.join(timeout)
        if reader.is_alive():  # its end of the channel lives on elsewhere (a child of the worker's)
            logger.warning(
                "webarena-live: a stopped worker's listeners were still arriving after %gs", timeout
            )

    def _serve(self, channel: socket.socket) -> None:
        """Answer one worker's messages until it is gone: `hold PORT` (a descriptor comes with it),
        `drop PORT`, `take PORT` (answered with the held descriptor, or none)."""
        while True:
            try:
                message, fds, _, _ = socket.recv_fds(channel, _MESSAGE, 1)
            except OSError:
                return
            if not message:
                return  # the worker exited; what it held stays held
            verb, _, port_text = message.decode("ascii", "replace").partition(" ")
            port = int(port_text) if port_text.isdigit() else 0
            if verb == "hold" and fds:
                self._keep(port, socket.socket(fileno=fds[0]))
                fds = fds[1:]
            elif verb == "drop":
                self.drop(port)
            elif verb == "take":  # the answer names its port: a late one is told from the next
                with self._lock:
                    held = self.held.get(port)
                    with contextlib.suppress(OSError):
                        if held is not None:
                            socket.send_fds(channel, [f"yes {port}".encode()], [held.fileno()])
                        else:
                            channel.send(f"no {port}".encode())
            for fd in fds:
                os.close(fd)

    def _keep(self, port: int, sock: socket.socket) -> None:
        with self._lock:
            old = self.held.pop(port, None)
            self.held[port] = sock
        if old is not None:
            old.close()

    def drop(self, port: int) -> None:
        """Close the kept copy of `port`'s listener (the port is no one's any more)."""
        with self._lock:
            sock = self.held.pop(port, None)
        if sock is not None:
            sock.close()

    def close(self) -> None:
        """Close everything: the worker is stopped for good."""
        with self._lock:
            held, self.held = self.held, {}
            channel, self._channel = self._channel, None
        for sock in held.values():
            sock.close()
        if channel is not None:
            channel.close()


class KeptListeners:
    """The child's side: its parent's copies of its listeners."""

    def __init__(self, channel: socket.socket) -> None:
        self.channel = channel
        self.channel.settimeout(TAKE_DEADLINE)
        self._lock = threading.Lock()

    def take(self, port: int) -> socket.socket | None:
        """The listener a previous worker opened on `port`, if the parent kept it (non-blocking).

        An answer to an earlier take that came after its deadline names another port: it is passed
        over (its descriptor closed) rather than taken for this one's.
        """
        with self._lock:
            try:
                self.channel.send(f"take {port}".encode())
                while True:
                    message, fds, _, _ = socket.recv_fds(self.channel, _MESSAGE, 1)
                    if not message:  # the parent closed its end
                        return None
                    verb, _, answered = message.decode("ascii", "replace").partition(" ")
                    if answered == str(port):
                        break
                    for fd in fds:
                        os.close(fd)
            except OSError as error:
                logger.warning("webarena-live: no kept listener for port %d: %s", port, error)
                return None
        if verb != "yes" or not fds:
            return None
        sock = socket.socket(fileno=fds[0])
        sock.setblocking(False)
        return sock

    def hold(self, sock: socket.socket) -> None:
        """Give the parent a copy of a listener just opened (a socket or asyncio's wrapper of one)."""
        port = sock.getsockname()[1]
        with self._lock, contextlib.suppress(OSError):
            socket.send_fds(self.channel, [f"hold {port}".encode()], [sock.fileno()])

    def drop(self, port: int) -> None:
        """The listener on `port` is closed for good: the parent closes its copy."""
        with self._lock, contextlib.suppress(OSError):
            self.channel.send(f"drop {port}".encode())


@cache
def kept_listeners() -> KeptListeners | None:
    """This process's parent keeping its listeners, when it was started with a channel to one."""
    fd = os.environ.pop(KEEPER_ENV, "")
    if not fd.isdigit() or not hasattr(socket, "send_fds"):
        return None
    try:
        channel = socket.socket(fileno=int(fd))
    except OSError:
        return None
    return KeptListeners(channel)
