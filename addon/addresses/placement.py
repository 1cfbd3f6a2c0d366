"""Which worker and which proxy port a session gets.

A session started with `POST /sessions` gets a listening port of its own (its *address*): a
browser launched with a bare `--proxy-server=http://HOST:PORT` is then tracked with nothing else
to configure. The port stays the session's while it runs, across restarts of the session and of
its worker, and is released when the session finishes. Ports come from a range
(`--session-ports LO-HI`) or, without one, from the operating system.

With several workers, a new session goes to the worker with the fewest running sessions (the
lowest index on a tie), and a name that already has a seat keeps it. Everything here is plain
bookkeeping: the caller opens and closes the listening ports. See docs/architecture.md, Workers.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass

from webarena_live.evaluator import WebArenaLiveError

BUSY_FOR = 300.0
"""Seconds a port a worker found busy is not offered to that worker again."""


class PlacementError(WebArenaLiveError):
    """A session cannot be given a worker or an address now."""


class AddressesExhausted(PlacementError):
    """Every port of the session range is held by a running session."""


@dataclass(frozen=True, slots=True)
class PortRange:
    """`LO-HI`, both included."""

    low: int
    high: int

    @classmethod
    def parse(cls, text: str) -> PortRange:
        """`20000-20999` (or one port, `20000`); `PlacementError` naming what is wrong."""
        low_text, dash, high_text = text.strip().partition("-")
        try:
            low = int(low_text)
            high = int(high_text) if dash else low
        except ValueError:
            raise PlacementError(f"session ports must look like 20000-20999, not {text!r}") from None
        if not 1 <= low <= high <= 65535:
            raise PlacementError(f"session ports {text!r}: need 1 <= LO <= HI <= 65535")
        return cls(low, high)

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.low, self.high + 1))

    def __len__(self) -> int:
        return self.high - self.low + 1

    def __str__(self) -> str:
        return f"{self.low}-{self.high}"


def port_is_free(host: str, port: int) -> bool:
    """Whether `port` can be listened on at `host` now (bound and closed again at once)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the proxy's own listener will
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def os_port(host: str) -> int:
    """A port the operating system has free at `host` now."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True, slots=True)
class Seat:
    """Where a session lives: its worker (0 with one process) and its own proxy port (None: none now)."""

    worker: int
    port: int | None


class Placement:
    """Which worker owns each session name, and the ports its running sessions hold.

    A name keeps its worker for the life of the placement (a finished session's trace and
    verdict stay readable there, and a later start of the same name lands beside them); its port
    is held from its start to its finish. `is_free(port)` says whether a port can be listened on
    (so a port some other program holds is skipped); `pick_port()` asks the operating system for
    one when there is no range.
    """

    def __init__(
        self,
        workers: int = 1,
        *,
        ports: PortRange | None = None,
        host: str = "127.0.0.1",
        is_free: Callable[[int], bool] | None = None,
        pick_port: Callable[[], int] | None = None,
        reserved: frozenset[int] = frozenset(),
    ) -> None:
        if workers < 1:
            raise PlacementError(f"need at least one worker, not {workers}")
        self.workers = workers
        self.ports = ports
        self.reserved = reserved
        """Ports never handed to a session (the proxy's own, the control port)."""
        self.is_free = is_free or (lambda port: port_is_free(host, port))
        self._pick_port = pick_port or (lambda: os_port(host))
        self._owners: dict[str, int] = {}
        self._ports: dict[str, int] = {}
        self._held: dict[int, int] = {}
        """How many sessions hold each port (one, but for a port an operator gave twice): `_free_port`
        reads it instead of collecting every session's port per start."""
        self._running: dict[int, int] = {}
        """Running sessions (holding a port) by worker, kept as they come and go: `choose_worker` is
        constant in the number of sessions."""
        self.down: set[int] = set()
        """Workers that take no new session now (restarting)."""
        self._busy: dict[int, dict[int, float]] = {}
        """Ports a worker found busy on its machine, by worker: port -> when (not picked for it again
        for `BUSY_FOR` seconds)."""

    def owner(self, session: str) -> int | None:
        return self._owners.get(session)

    def held_ports(self) -> dict[str, int]:
        """The port each running session holds, by session name (a copy: O(sessions), not for the
        per-start path; `port_of` answers for one session)."""
        return dict(self._ports)

    def port_of(self, session: str) -> int | None:
        """The port `session` holds, if any."""
        return self._ports.get(session)

    def running_on(self, worker: int) -> list[str]:
        """The sessions holding a port on `worker` (its running sessions)."""
        return [name for name in self._ports if self._owners[name] == worker]

    def choose_worker(self, among: Collection[int] | None = None) -> int:
        """The worker that is up with the fewest running sessions (the lowest index on a tie), of
        `among` when given (the workers on the node an agent asked to be near)."""
        pool = [w for w in range(self.workers) if w not in self.down and (among is None or w in among)]
        if not pool:
            raise PlacementError("no worker is up to take a session; retry in a moment")
        return min(pool, key=lambda worker: (self._running.get(worker, 0), worker))

    def mark_busy(self, worker: int, port: int | None) -> None:
        """Worker `worker` could not listen on `port` (another program holds it on its machine)."""
        if port is not None:
            self._busy.setdefault(worker, {})[port] = time.monotonic()

    def _busy_on(self, worker: int) -> set[int]:
        now = time.monotonic()
        marked = self._busy.get(worker, {})
        for port in [port for port, when in marked.items() if now - when > BUSY_FOR]:
            del marked[port]
        return set(marked)

    def place(
        self,
        session: str,
        *,
        address: bool = True,
        port: int | None = None,
        among: Collection[int] | None = None,
    ) -> Seat:
        """The session's seat: its worker (kept, else the least busy that is up, of `among` when
        given) and, with `address`, a port (the one it holds, else `port` if given, else a free one).
        `AddressesExhausted` when the range has no port left; nothing changes then."""
        worker = self._owners.get(session)
        if worker is None or (among is not None and worker not in among and session not in self._ports):
            worker = self.choose_worker(among)
        if address and session not in self._ports:
            chosen = port if port is not None else self._free_port(self._busy_on(worker))
            self._ports[session] = chosen
            self._held[chosen] = self._held.get(chosen, 0) + 1
            self._running[worker] = self._running.get(worker, 0) + 1
        self._owners[session] = worker
        return Seat(worker, self._ports.get(session))

    def release(self, session: str) -> int | None:
        """Free the session's port (the next session may get it); the port it held, if any."""
        port = self._ports.pop(session, None)
        if port is not None:
            self._unhold(port, self._owners.get(session))
        return port

    def forget(self, session: str) -> None:
        """The session is gone with its worker's node: its name and port are free for a new start."""
        self.release(session)
        self._owners.pop(session, None)

    def _unhold(self, port: int, worker: int | None) -> None:
        left = self._held.get(port, 0) - 1
        if left > 0:
            self._held[port] = left
        else:
            self._held.pop(port, None)
        if worker is not None and (running := self._running.get(worker, 0) - 1) >= 0:
            self._running[worker] = running

    def _taken(self, port: int, busy: set[int]) -> bool:
        return port in self._held or port in self.reserved or port in busy

    def _free_port(self, busy: set[int]) -> int:
        if self.ports is None:
            for _ in range(64):  # the operating system may hand back a port a session holds
                port = self._pick_port()
                if not self._taken(port, busy):
                    return port
            raise PlacementError("the operating system gave no free port")
        for port in self.ports:
            if not self._taken(port, busy) and self.is_free(port):
                return port
        running = len(set(self._held) & set(self.ports))
        raise AddressesExhausted(
            f"every port of the session range {self.ports} is in use ({running} held "
            "by running sessions); finish a session, or widen --session-ports"
        )
