"""The worker processes of `serve --workers N`: started, watched, started again when they die.

Each worker is a whole `webarena-live serve` (mitmproxy and the addon, every session it holds
in its own memory) on ports of 127.0.0.1 the front chose, kept across restarts: the sessions'
own addresses, which agents' browsers were launched with, come back where they were. A worker
that exits without being asked is started again and its running sessions are resumed from their
journals (docs/architecture.md, Workers).
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import signal
import sys
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass

from webarena_live.launch import LaunchError, Ports, ServeProcess, free_ports

logger = logging.getLogger(__name__)

RESTART_PAUSE = 0.5
"""Seconds between a worker's death and its restart (a worker that dies at once does not spin)."""


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

    @property
    def control_url(self) -> str:
        return f"http://{self.host}:{self.ports.control}"

    @property
    def pid(self) -> int | None:
        if self.node_pid is not None:
            return self.node_pid
        return self.process.pid if self.process is not None and self.process.process is not None else None


class Workers:
    """What the front needs of a pool of workers, local processes (`WorkerPool`) or Ray actors
    (`ray_pool.RayWorkerPool`): the workers by index, started and stopped."""

    workers: list[Worker]

    def __iter__(self) -> Iterator[Worker]:
        return iter(self.workers)

    def __getitem__(self, index: int) -> Worker:
        return self.workers[index]

    async def start(self) -> None:
        raise NotImplementedError

    async def stop(self) -> None:
        raise NotImplementedError


class WorkerPool(Workers):
    """`count` workers, each `serve_args(index)` on its own ports.

    `on_restart(index)` runs once a restarted worker answers again (the front resumes its sessions
    there); `on_down(index)` as soon as one is found dead.
    """

    def __init__(
        self,
        count: int,
        serve_args: Callable[[int], Sequence[str]],
        *,
        on_down: Callable[[int], None],
        on_restart: Callable[[int], Awaitable[None]],
        env: dict[str, str] | None = None,
    ) -> None:
        ports = free_ports(3 * count)
        self.workers = [Worker(i, Ports(*ports[3 * i : 3 * i + 3])) for i in range(count)]
        self._serve_args = serve_args
        self._on_down, self._on_restart = on_down, on_restart
        self._env = env
        self._watchers: list[asyncio.Task[None]] = []
        self._stopping = False

    def _process(self, worker: Worker) -> ServeProcess:
        # A process session of its own: a terminal's Ctrl-C reaches the front only, which stops the
        # workers in order (a worker killed by it first would be restarted).
        return ServeProcess(
            *self._serve_args(worker.index), ports=worker.ports, env=self._env, inherit_output=True,
            own_session=True, preexec_fn=end_with_parent,
        )  # fmt: skip

    async def start(self) -> None:
        """Start every worker and wait until each answers; `LaunchError` if one cannot start. The first
        starts alone: a mistake on the command line is then told once, by it, not by every worker."""
        for worker in self.workers:
            worker.process = self._process(worker)
        first, *rest = [w.process for w in self.workers if w.process is not None]
        try:
            await asyncio.to_thread(first.start)
            await asyncio.gather(*(asyncio.to_thread(process.start) for process in rest))
        except LaunchError:
            await self.stop()
            raise
        for worker in self.workers:
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
            self._on_down(worker.index)
            while not self._stopping:
                await asyncio.sleep(RESTART_PAUSE)
                worker.process = self._process(worker)
                try:
                    await asyncio.to_thread(worker.process.start)
                except LaunchError as error:
                    logger.error("webarena-live: worker %d did not start again: %s", worker.index, error)
                    continue
                break
            if self._stopping:
                return
            worker.restarts += 1
            await self._on_restart(worker.index)
            worker.up = True
            logger.warning("webarena-live: worker %d is back (pid %s)", worker.index, worker.pid)

    async def stop(self) -> None:
        """Stop every worker as Ctrl-C does (each reports its unfinished sessions)."""
        self._stopping = True
        await asyncio.gather(
            *(asyncio.to_thread(w.process.stop) for w in self.workers if w.process is not None)
        )
        for watcher in self._watchers:
            watcher.cancel()
