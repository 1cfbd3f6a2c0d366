"""The worker processes of `serve --workers N`: started, watched, started again when they die.

Each worker is a whole `webarena-live serve` (mitmproxy and the addon, every session it holds
in its own memory) on ports of 127.0.0.1 the front chose, kept across restarts: the sessions'
own addresses, which agents' browsers were launched with, come back where they were. A worker
that exits without being asked is started again and its running sessions are resumed from their
journals (docs/architecture.md, Workers).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import signal
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from webarena_live.addresses.listeners import ListenerKeeper
from webarena_live.launch import LaunchError, Ports, ServeProcess, free_ports

logger = logging.getLogger(__name__)

RESTART_PAUSE = 0.5
"""Seconds between a worker's death and its restart (a worker that dies at once does not spin)."""
RESTART_TRIES = 5
"""Starts in a row that fail before the worker's running sessions are reported lost (it is tried
again, ever more slowly, for new sessions)."""
RESTART_PAUSE_MAX = 30.0


def end_with_parent() -> None:
    """In the worker, before it starts (Linux): a SIGTERM when its parent dies, even by SIGKILL, so no
    worker outlives it holding its ports. And Ctrl-C's and SIGTERM's signals back to their defaults:
    a parent that ignores or blocks them (Ray's worker processes do) would pass that on through
    exec, and the worker could then not be stopped in order."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


PR_SET_PDEATHSIG = 1


@dataclass
class Worker:
    """One worker process and the ports it keeps across restarts."""

    index: int
    ports: Ports
    process: ServeProcess | None = None
    up: bool = False
    restarts: int = 0
    host: str = "127.0.0.1"
    """The address its ports listen on (a Ray worker's: its node's)."""
    node: str | None = None
    """Its Ray node id (None: a local worker)."""
    actor: str | None = None
    """Its Ray actor's name (in the `webarena-live` namespace)."""
    node_pid: int | None = None
    """The pid of a Ray worker's `serve` on its node."""
    actor_pid: int | None = None
    """The pid of a Ray worker's actor process: the one Ray names in the output it passes on."""
    node_lost: bool = False
    """Its node left the cluster (its sessions are lost) and it is not back yet."""
    responsive: bool = True
    """It answered the front's last probes (`fleet/front/liveness.py`); False: alive but silent."""
    misses: int = 0
    stalled: asyncio.Event = field(default_factory=asyncio.Event)
    """Set while it does not answer: calls to it in flight are given up (`WorkerLink.send`)."""

    def revive(self) -> None:
        """Started again (a new process): it answers, whatever its predecessor did."""
        self.misses = 0
        self.responsive = True
        if self.stalled.is_set():
            self.stalled = asyncio.Event()

    @property
    def control_url(self) -> str:
        return f"http://{self.host}:{self.ports.control}"

    @property
    def pid(self) -> int | None:
        if self.node_pid is not None:
            return self.node_pid
        return self.process.pid if self.process is not None and self.process.process is not None else None


class WorkerEvents(Protocol):
    """What the workers tell the front (`front/recovery.py`): `worker_down(index)` as soon as one is
    found dead; `resume_on(index)` once a restarted one answers again (its sessions resumed there; cut
    short if it dies meanwhile); `worker_lost(index, reason)` when its sessions cannot come back."""

    def worker_down(self, index: int) -> None: ...

    async def resume_on(self, index: int) -> None: ...

    def worker_lost(self, index: int, reason: str) -> None: ...


class Workers(ABC):
    """What the front needs of its workers, local processes (`LocalWorkers`) or Ray actors
    (`ray_workers.RayWorkers`): the workers by index, started (telling `events` what befalls them; they
    reach the front at `front_at`, HOST:PORT) and stopped."""

    workers: list[Worker]

    def __iter__(self) -> Iterator[Worker]:
        return iter(self.workers)

    def __getitem__(self, index: int) -> Worker:
        return self.workers[index]

    def __len__(self) -> int:
        return len(self.workers)

    @abstractmethod
    async def start(self, events: WorkerEvents, front_at: str) -> None: ...

    @abstractmethod
    async def stop(self) -> None: ...

    def forget_port(self, index: int, port: int) -> None:  # noqa: B027 (workers that keep no listeners: nothing)
        """Port `port` of worker `index` is no session's any more: the listener kept for it is closed."""


class LocalWorkers(Workers):
    """`count` worker processes on this machine, each `serve_args(index, front_at)` on its own ports.

    A worker that cannot be started again `RESTART_TRIES` times is told lost. Each worker's listening
    sockets are kept here across its restarts (`addresses/listeners.py`): during a restart its ports
    accept connections, which the next worker serves.
    """

    def __init__(
        self,
        count: int,
        serve_args: Callable[[int, str], Sequence[str]],
        *,
        env: dict[str, str] | None = None,
        listen_host: str = "127.0.0.1",
    ) -> None:
        ports = free_ports(3 * count)
        self.listen_host = listen_host
        """Where the workers' proxy ports listen (their control ports are on 127.0.0.1)."""
        self.workers = [Worker(i, Ports(*ports[3 * i : 3 * i + 3])) for i in range(count)]
        self.keepers = [ListenerKeeper() for _ in range(count)]
        self._serve_args = serve_args
        self._front_at = ""
        self._events: WorkerEvents | None = None
        self._env = env
        self._watchers: list[asyncio.Task[None]] = []
        self._stopping = False

    def _process(self, worker: Worker, *, first: bool = False) -> ServeProcess:
        # A process session of its own: a terminal's Ctrl-C reaches the front only, which stops the
        # workers in order (a worker killed by it first would be restarted). Its first start may
        # draw new ports if another program took one since `__init__`: no one has been told them yet.
        # A restart keeps its ports: sessions and the shared ports lead there.
        return ServeProcess(
            *self._serve_args(worker.index, self._front_at), ports=worker.ports, env=self._env,
            inherit_output=True, own_session=True, preexec_fn=end_with_parent,
            keeper=self.keepers[worker.index], redraw=first, listen_host=self.listen_host,
        )  # fmt: skip

    def forget_port(self, index: int, port: int) -> None:
        self.keepers[index].drop(port)

    async def start(self, events: WorkerEvents, front_at: str) -> None:
        """Start every worker and wait until each answers; `LaunchError` if one cannot start. The first
        starts alone: a mistake on the command line is then told once, by it, not by every worker."""
        self._events, self._front_at = events, front_at
        for worker in self.workers:
            worker.process = self._process(worker, first=True)
        first, *rest = [w.process for w in self.workers if w.process is not None]
        try:
            await asyncio.to_thread(first.start)
            await asyncio.gather(*(asyncio.to_thread(process.start) for process in rest))
        except LaunchError:
            await self.stop()
            raise
        for worker in self.workers:
            assert worker.process is not None
            worker.ports = worker.process.ports  # drawn again if one was taken
            worker.up = True
            self._watchers.append(asyncio.create_task(self._watch(worker)))

    async def _watch(self, worker: Worker) -> None:
        while not self._stopping:
            process = worker.process
            assert process is not None and process.process is not None
            code = await asyncio.to_thread(process.process.wait)
            if self._stopping:
                return
            worker.up = False
            logger.warning(
                "webarena-live: worker %d (pid %s) exited with code %s; starting it again on the same ports",
                worker.index, process.pid, code,
            )  # fmt: skip
            assert self._events is not None
            self._events.worker_down(worker.index)
            if not await self._start_again(worker):
                return
            worker.restarts += 1
            worker.revive()
            if await self._resumed(worker):
                worker.up = True
                logger.warning("webarena-live: worker %d is back (pid %s)", worker.index, worker.pid)

    async def _start_again(self, worker: Worker) -> bool:
        """Start the worker again, ever more slowly while it fails; its running sessions are reported
        lost after `RESTART_TRIES` failures. False when the workers stop first."""
        failures, pause = 0, RESTART_PAUSE
        while not self._stopping:
            await asyncio.sleep(pause)
            worker.process = self._process(worker)
            try:
                await asyncio.to_thread(worker.process.start)
                return not self._stopping
            except LaunchError as error:
                failures += 1
                logger.error("webarena-live: worker %d did not start again: %s", worker.index, error)
                if failures == RESTART_TRIES:
                    assert self._events is not None
                    self._events.worker_lost(
                        worker.index, f"worker {worker.index} did not start again: {error}"
                    )
                pause = min(pause * 2, RESTART_PAUSE_MAX)
        return False

    async def _resumed(self, worker: Worker) -> bool:
        """Resume the worker's sessions there; False when it died meanwhile (the watcher starts it again)."""
        process = worker.process
        assert process is not None and process.process is not None
        assert self._events is not None
        resuming = asyncio.ensure_future(self._events.resume_on(worker.index))
        exited = asyncio.ensure_future(asyncio.to_thread(process.process.wait))
        await asyncio.wait({resuming, exited}, return_when=asyncio.FIRST_COMPLETED)
        if resuming.done():
            exited.cancel()  # the thread stays until the process exits: harmless
            with contextlib.suppress(Exception):
                resuming.result()
            return True
        resuming.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await resuming
        logger.warning("webarena-live: worker %d died while its sessions were resumed", worker.index)
        return False

    async def stop(self) -> None:
        """Stop every worker as Ctrl-C does (each reports its unfinished sessions)."""
        self._stopping = True
        await asyncio.gather(
            *(asyncio.to_thread(w.process.stop) for w in self.workers if w.process is not None)
        )
        for watcher in self._watchers:
            watcher.cancel()
        for keeper in self.keepers:
            keeper.close()
