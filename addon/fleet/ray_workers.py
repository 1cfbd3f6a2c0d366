"""The workers of `serve --workers N --ray ADDRESS`: the same `serve` processes, started by Ray actors
on the nodes of a cluster.

Each worker is a `ServeWorker` actor holding one `webarena-live serve` child on its node's address.
The actors are spread over the nodes by a placement group (one bundle of `cpus` per worker, SPREAD),
and Ray restarts an actor that dies. A worker keeps what it needs to come back in a folder of its
node's temp directory (its ports, its journals, its outputs), so an actor restarted on the same node
starts `serve` again on the same ports and its running sessions resume from their journals; an actor
restarted on another node (its node left the cluster) starts afresh, and the front reports the
sessions it held as lost. Nothing is assumed shared between nodes: the task and site files and the
proxy's CA are carried to each worker in its setup, and each finished session's files are read back
through Ray (`read_outputs`). See docs/architecture.md, Ray.

This is the only module of the product (with `webarena_live.ray`) that imports Ray.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ray
from ray.exceptions import ActorDiedError, ActorUnavailableError, GetTimeoutError, RayActorError
from ray.util.placement_group import PlacementGroup, placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from webarena_live.addon.fleet.workers import Worker, Workers, end_with_parent
from webarena_live.evaluator import holding_run_dir
from webarena_live.launch import LaunchError, Ports, ServeProcess, free_ports

logger = logging.getLogger("webarena_live.addon.fleet")

STATE_DIR = "webarena-live-ray"
"""Under the node's temp directory: `<fleet id>/worker-<index>/<node id>/` holds a worker's state."""
RESTART_WAIT = 30.0
"""Seconds a restarted actor retries its ports (its predecessor's `serve` may still be stopping)."""
GROUP_TIMEOUT = 60.0
"""Seconds to wait for the cluster to hold every worker's bundle."""
POLL = 0.5
STOP_TIMEOUT = 20.0
"""Seconds the workers may take to stop in order (each reports its unfinished sessions)."""


@dataclass(frozen=True)
class WorkerSetup:
    """What every worker is started with, carried to its node by Ray."""

    fleet: str
    """This fleet's id: names the workers' state folders, so two fleets on one node never mix."""
    args: tuple[tuple[str, ...], ...]
    """Each worker's `serve` flags, without ports, output and journal folders, and the files below."""
    files: dict[str, tuple[str, bytes]] = field(default_factory=dict)
    """Flag -> (file name, content): the task and site files, written on the node."""
    ca: dict[str, bytes] = field(default_factory=dict)
    """mitmproxy's CA files, so a browser that trusts one worker trusts all."""
    env: dict[str, str] = field(default_factory=dict)
    listen_host: str | None = None
    """Where the worker's ports listen; None: its node's address."""


class ServeWorker:
    """A Ray actor: one `webarena-live serve` on this node (`ray.remote` is applied by the pool)."""

    def __init__(self, index: int, setup: WorkerSetup) -> None:
        context = ray.get_runtime_context()
        self.node = context.get_node_id()
        self.host = setup.listen_host or ray.util.get_node_ip_address()
        self.root = Path(tempfile.gettempdir()) / STATE_DIR / setup.fleet / f"worker-{index}" / self.node
        record = self.root / "worker.json"
        self.resumed = record.is_file()
        """True when this node ran this worker before (Ray restarted the actor): same ports, journals."""
        if self.resumed:
            ports = Ports(**json.loads(record.read_text())["ports"])
        else:
            ports = Ports(*free_ports(3, self.host))
            self.root.mkdir(parents=True, exist_ok=True)
            record.write_text(json.dumps({"ports": ports.__dict__}))
        self.output_dir = self.root / "out"
        journal = f"webarena_journal_dir={self.root / 'journal'}"
        argv = [*setup.args[index], "--output-dir", str(self.output_dir), "--listen-host", self.host,
                "--control-host", self.host, "--set", journal]  # fmt: skip
        for flag, (name, content) in setup.files.items():
            path = self.root / "files" / f"{flag.strip('-')}-{name}"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
            argv += [flag, str(path)]
        if setup.ca:
            confdir = self.root / "mitmproxy"
            confdir.mkdir(parents=True, exist_ok=True)
            for name, content in setup.ca.items():
                (confdir / name).write_bytes(content)
            argv += ["--set", f"confdir={confdir}"]
        self.stopping = False
        self.process = ServeProcess(
            *argv, ports=ports, host=self.host, env=setup.env, inherit_output=True, own_session=True,
            preexec_fn=end_with_parent,
        )  # fmt: skip
        self._start()

    def _start(self) -> None:
        """Start `serve`; a restarted actor retries while its predecessor's child frees the ports."""
        deadline = time.monotonic() + RESTART_WAIT
        while True:
            try:
                self.process.start()
                return
            except LaunchError:
                if not self.resumed or time.monotonic() > deadline:
                    raise
                time.sleep(POLL)

    def where(self) -> dict[str, Any]:
        """Where this worker runs and how to reach it."""
        return {
            "node": self.node, "host": self.host, "ports": self.process.ports.__dict__,
            "pid": self.process.pid, "resumed": self.resumed, "output_dir": str(self.output_dir),
        }  # fmt: skip

    def wait(self) -> int | None:
        """Returns when `serve` exits. Exiting unasked, it takes the actor with it: Ray then restarts
        the actor, which starts `serve` again and its sessions resume."""
        assert self.process.process is not None
        code = self.process.process.wait()
        if not self.stopping:
            logger.warning("webarena-live: worker serve exited with code %s; restarting its actor", code)
            os._exit(1)
        return code

    def read_outputs(self, paths: list[str]) -> dict[str, bytes]:
        """The bytes of a finished session's files, by path, read while no finish of this node moves
        them (only files under this worker's outputs; a file moved aside already is missing)."""
        found: dict[str, bytes] = {}
        if not paths:
            return found
        with holding_run_dir(Path(paths[0]).parent):
            for path in paths:
                resolved = Path(path).resolve()
                if self.output_dir.resolve() in resolved.parents and resolved.is_file():
                    found[path] = resolved.read_bytes()
        return found

    def stop(self) -> int | None:
        """Stop `serve` as Ctrl-C does, and forget this worker's state on this node."""
        self.stopping = True
        code = self.process.stop()
        shutil.rmtree(self.root.parent, ignore_errors=True)
        with contextlib.suppress(OSError):  # the fleet's folder, once its last worker on this node is gone
            self.root.parent.parent.rmdir()
        return code


class RayWorkerPool(Workers):
    """`count` `ServeWorker` actors spread over a Ray cluster's nodes, watched as `WorkerPool` watches
    its processes.

    `on_down(index)` runs as soon as a worker is found gone; `on_lost(index, reason)` when its node left
    the cluster (its running sessions cannot resume); `on_restart(index)` once it answers again.
    """

    def __init__(
        self,
        count: int,
        setup: WorkerSetup,
        *,
        cpus: float,
        on_down: Callable[[int], None],
        on_lost: Callable[[int, str], None],
        on_restart: Callable[[int], Awaitable[None]],
    ) -> None:
        self.workers = [Worker(i, Ports(0, 0, 0)) for i in range(count)]
        self.setup, self.cpus = setup, cpus
        self._on_down, self._on_lost, self._on_restart = on_down, on_lost, on_restart
        self.actors: list[Any] = []
        self.output_dirs: list[str] = [""] * count
        self.group: PlacementGroup | None = None
        self._watchers: list[asyncio.Task[None]] = []
        self._stopping = False

    async def start(self) -> None:
        """Place the workers, start each and wait until every one answers; `LaunchError` if the
        cluster cannot hold them or one cannot start."""
        bundles = [{"CPU": self.cpus} for _ in self.workers]
        self.group = placement_group(bundles, strategy="SPREAD", name=f"webarena-live-{self.setup.fleet}")
        try:
            await asyncio.wait_for(_awaited(self.group.ready()), GROUP_TIMEOUT)
        except TimeoutError:
            await self.stop()
            have = ray.cluster_resources().get("CPU", 0)
            raise LaunchError(
                f"the Ray cluster cannot place {len(bundles)} workers of {self.cpus:g} CPU each within "
                f"{GROUP_TIMEOUT:.0f}s (it has {have:g} CPUs): use fewer --workers, or add nodes"
            ) from None
        actor_class = ray.remote(ServeWorker)
        for worker in self.workers:
            strategy = PlacementGroupSchedulingStrategy(self.group, placement_group_bundle_index=worker.index)
            # Restarted without end (a dead node's worker comes back elsewhere); calls are not retried:
            # the front decides what a worker that died mid-call means. `wait` blocks, hence threads.
            actor = actor_class.options(
                scheduling_strategy=strategy,
                num_cpus=self.cpus,
                max_restarts=-1,
                max_task_retries=0,
                max_concurrency=8,
                name=f"webarena-live-{self.setup.fleet}-{worker.index}",
                lifetime=None,
            )
            self.actors.append(actor.remote(worker.index, self.setup))
        try:
            wheres = await asyncio.gather(*(_awaited(actor.where.remote()) for actor in self.actors))
        except RayActorError as error:
            await self.stop()
            raise LaunchError(f"a worker did not start: {error}") from None
        for worker, where in zip(self.workers, wheres, strict=True):
            self._took(worker, where)
            worker.up = True
            self._watchers.append(asyncio.create_task(self._watch(worker)))

    def _took(self, worker: Worker, where: dict[str, Any]) -> None:
        worker.host, worker.node = where["host"], where["node"]
        worker.ports = Ports(**where["ports"])
        worker.node_pid, worker.node_lost = where["pid"], False
        worker.actor = f"webarena-live-{self.setup.fleet}-{worker.index}"
        self.output_dirs[worker.index] = where["output_dir"]

    async def _watch(self, worker: Worker) -> None:
        actor = self.actors[worker.index]
        while not self._stopping:
            with contextlib.suppress(RayActorError, ActorUnavailableError):
                await _awaited(actor.wait.remote())
            if self._stopping:
                return
            worker.up = False
            logger.warning(
                "webarena-live: worker %d (node %s, pid %s) is gone; Ray restarts it",
                worker.index, worker.node, worker.pid,
            )  # fmt: skip
            self._on_down(worker.index)
            where = await self._back(worker, actor)
            if where is None:
                return
            if not where["resumed"] or where["node"] != worker.node:
                self._lose(worker, f"worker {worker.index} started afresh on another node")
            self._took(worker, where)
            worker.restarts += 1
            await self._on_restart(worker.index)
            worker.up = True
            logger.warning(
                "webarena-live: worker %d is back on node %s (pid %s)", worker.index, worker.node, worker.pid
            )

    async def _back(self, worker: Worker, actor: Any) -> dict[str, Any] | None:
        """The restarted actor's `where()`; reports the worker's sessions lost as soon as its node is
        gone. None when the pool stops first, or Ray gives the actor up."""
        while not self._stopping:
            if not worker.node_lost and not await asyncio.to_thread(_node_alive, worker.node):
                self._lose(worker, f"node {worker.node} left the Ray cluster")
            try:
                where: dict[str, Any] = await asyncio.wait_for(_awaited(actor.where.remote()), POLL * 4)
                return where
            except ActorDiedError as error:
                self._lose(worker, f"Ray gave worker {worker.index} up: {error}")
                return None
            except (ActorUnavailableError, RayActorError, GetTimeoutError, TimeoutError):
                await asyncio.sleep(POLL)
        return None

    def _lose(self, worker: Worker, reason: str) -> None:
        if not worker.node_lost:
            worker.node_lost = True
            self._on_lost(worker.index, reason)

    async def read_outputs(self, index: int, paths: list[str]) -> dict[str, bytes]:
        found: dict[str, bytes] = await _awaited(self.actors[index].read_outputs.remote(paths))
        return found

    async def stop(self) -> None:
        """Stop every worker as Ctrl-C does, then free their places in the cluster."""
        self._stopping = True
        for watcher in self._watchers:
            watcher.cancel()
        # A worker that is not up (its node gone, Ray placing it again) has nothing to stop in order.
        stops = [_awaited(self.actors[w.index].stop.remote()) for w in self.workers if w.up and self.actors]
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(*stops, return_exceptions=True), STOP_TIMEOUT)
        for actor in self.actors:
            ray.kill(actor, no_restart=True)
        if self.group is not None:
            remove_placement_group(self.group)


def _node_alive(node: str | None) -> bool:
    return any(entry["NodeID"] == node and entry["Alive"] for entry in ray.nodes())


async def _awaited(ref: Any) -> Any:
    """A Ray object ref (or a placement group's ready ref) as a cancellable asyncio awaitable."""
    return await asyncio.wrap_future(ref.future())
