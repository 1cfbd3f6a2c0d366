"""The workers of `serve --workers N --ray ADDRESS`: `ServeWorker` actors (`ray_actor.py`) spread over
a Ray cluster's nodes, watched as `LocalWorkers` watches its processes.

The actors are spread over the nodes by a placement group (one bundle of `CPUS_PER_WORKER` per worker,
SPREAD), and Ray restarts an actor that dies. This module and `ray_actor.py` are the only ones of the
fleet that import Ray (`webarena_live.ray`, the public face, is the other); only `--ray` imports them.
See docs/architecture.md, Ray.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import ipaddress
import logging
import os
import socket
import sys
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ray
from ray.exceptions import ActorDiedError, GetTimeoutError, RayActorError
from ray.util.placement_group import PlacementGroup, placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from webarena_live.control.run_view import run_figures
from webarena_live.evaluator import load_tasks, prepare_output_dir
from webarena_live.fleet.front.carry import CarriedOutputs
from webarena_live.fleet.workers.local import Worker, WorkerEvents, Workers
from webarena_live.fleet.workers.ray_actor import ServeWorker, WorkerSetup
from webarena_live.launch import LaunchError, Ports

if TYPE_CHECKING:
    from webarena_live.fleet.service import FleetPlan

logger = logging.getLogger("webarena_live.fleet")

NAMESPACE = "webarena-live"
"""The Ray namespace of the fleet's actors (named `webarena-live-<fleet>-<index>`)."""
CPUS_PER_WORKER = 1.0
"""A worker is one proxy process: one core's work at most (its bundle in the placement group)."""
GROUP_TIMEOUT = 60.0
"""Seconds to wait for the cluster to hold every worker's bundle."""
POLL = 0.5
CALL = 10.0
"""Seconds a short Ray call to an actor (`where`, the cluster's nodes) may take."""
WAIT_SLICE = 30.0
"""Seconds each `wait` on an actor blocks before it answers anyway (then it is asked again)."""
READ_DEADLINE = 30.0
"""Seconds reading a finished session's files from a worker's node may take."""
STOP_TIMEOUT = 20.0
"""Seconds the workers may take to stop in order (each reports its unfinished sessions)."""


def connect(address: str) -> None:
    """Join the cluster as a driver (`auto`: the one this machine is in); `ConnectionError` naming it.

    The workers' output comes through this process's: without colour codes when that is no terminal
    (a log file), and without Ray's warning that it set no SIGTERM handler (it joins from a thread;
    the front handles SIGTERM itself)."""
    if not sys.stdout.isatty():
        os.environ.setdefault("RAY_COLOR_PREFIX", "0")
    quiet = logging.getLogger("ray._private.worker")
    quiet.addFilter(_no_sigterm_warning)
    try:
        ray.init(address=address, namespace=NAMESPACE, log_to_driver=True, logging_level=logging.WARNING)
    except (ConnectionError, RuntimeError, ValueError) as error:
        raise ConnectionError(f"cannot join the Ray cluster at {address!r}: {error}") from None
    finally:
        quiet.removeFilter(_no_sigterm_warning)


def _no_sigterm_warning(record: logging.LogRecord) -> bool:
    return not record.getMessage().startswith("SIGTERM handler is not set")


def node_address() -> str:
    """This process's Ray node's address (where workers on other nodes reach it)."""
    address: str = ray.util.get_node_ip_address()
    return address


def host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


Report = Callable[[str | None], Awaitable[dict[str, Any]]]


def ray_workers(
    plan: FleetPlan, env: dict[str, str]
) -> tuple[RayWorkers, CarriedOutputs | None, Report | None]:
    """The workers on the cluster (connected already), not started yet; with an output directory, how
    their files are carried here and the report of the carried files."""
    assert plan.ray is not None
    output_dir = Path(plan.ray.output_dir).resolve() if plan.ray.output_dir else None
    setup = WorkerSetup(
        fleet=uuid.uuid4().hex[:12],
        journals=journals_name(output_dir),
        args=(),  # the workers' flags name the front's address, known at their start
        files=plan.ray.files,
        ca=plan.ray.ca,
        env=env,
        listen_host=None if _loopback(plan.listen_host) else plan.listen_host,
    )
    workers = RayWorkers(plan.count, setup, plan.ray.worker_argv, cpus=CPUS_PER_WORKER)
    if not plan.ray.output_dir:
        return workers, None, None
    here = prepare_output_dir(plan.ray.output_dir)
    tasks = load_tasks(plan.ray.tasks) if plan.ray.tasks else load_tasks()
    outputs = CarriedOutputs(here, lambda index: workers.output_dirs[index], workers.read_outputs)
    return workers, outputs, lambda run: run_figures(here, tasks, run)


def journals_name(output_dir: Path | None) -> str:
    """The name of the workers' journal folders on each node: the same for every `serve --ray` on one
    output directory of one machine (a restart finds the journals), another for another."""
    where = f"{socket.gethostname()}:{output_dir}" if output_dir else f"{socket.gethostname()}:{os.getuid()}"
    return hashlib.sha256(where.encode()).hexdigest()[:16]


def _loopback(host: str) -> bool:
    """Whether `host` is this machine only: then each worker listens on its own node's address."""
    try:
        return ipaddress.ip_address(socket.gethostbyname(host)).is_loopback
    except (OSError, ValueError):
        return False


class RayWorkers(Workers):
    """`count` `ServeWorker` actors spread over a Ray cluster's nodes, watched as `LocalWorkers` watches
    its processes; each runs `serve` with `argv(index, front_at)`. A worker whose node left the cluster
    is told lost (its running sessions cannot resume)."""

    def __init__(
        self, count: int, setup: WorkerSetup, argv: Callable[[int, str], list[str]], *, cpus: float
    ) -> None:
        self.workers = [Worker(i, Ports(0, 0, 0)) for i in range(count)]
        self.setup, self.argv, self.cpus = setup, argv, cpus
        self._events: WorkerEvents | None = None
        self.actors: list[Any] = []
        self.output_dirs: list[str] = [""] * count
        self.group: PlacementGroup | None = None
        self._seen: list[dict[str, Any]] = [{} for _ in range(count)]
        """What each worker's actor last said of itself (`instance`, `deaths`)."""
        self._watchers: list[asyncio.Task[None]] = []
        self._stopping = False

    async def start(self, events: WorkerEvents, front_at: str) -> None:
        """Place the workers, start each and wait until every one answers; `LaunchError` if the
        cluster cannot hold them or one cannot start. `front_at`: the HOST:PORT where they reach the
        front (`fleet/front/door.py`)."""
        self._events = events
        args = tuple(tuple(self.argv(worker.index, front_at)) for worker in self.workers)
        self.setup = replace(self.setup, args=args)
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
        except (RayActorError, ray.exceptions.RayTaskError) as error:
            await self.stop()
            raise LaunchError(f"a worker did not start: {error}") from None
        for worker, where in zip(self.workers, wheres, strict=True):
            self._took(worker, where)
            self._seen[worker.index] = where
            worker.up = True
            self._watchers.append(asyncio.create_task(self._watch(worker)))

    def _took(self, worker: Worker, where: dict[str, Any]) -> None:
        self._seen[worker.index] = where
        worker.host, worker.node = where["host"], where["node"]
        worker.ports = Ports(**where["ports"])
        worker.node_pid, worker.actor_pid, worker.node_lost = where["pid"], where.get("actor_pid"), False
        worker.actor = f"webarena-live-{self.setup.fleet}-{worker.index}"
        self.output_dirs[worker.index] = where["output_dir"]

    async def _watch(self, worker: Worker) -> None:
        """Follow the worker: its `serve` restarted by its actor (same sockets: resume its sessions),
        its actor restarted by Ray (same node: resume; another node: its sessions are lost), its node
        gone (its sessions are lost), or only a silence: contact lost is not death, nothing is
        resumed or lost (`fleet/front/liveness.py` lists it unresponsive meanwhile)."""
        actor = self.actors[worker.index]
        while not self._stopping:
            seen = self._seen[worker.index]
            try:
                asked = actor.wait.remote(seen["instance"], seen["deaths"], False, WAIT_SLICE)
                where = await _within(asked, WAIT_SLICE + CALL)
            except ActorDiedError as error:
                self._gone(worker, "is gone for good")
                self._lose(worker, f"Ray gave worker {worker.index} up: {error}")
                return
            except (RayActorError, TimeoutError, GetTimeoutError):  # no answer: Ray's word decides
                if not worker.node_lost and not await _node_alive(worker.node):
                    self._gone(worker, "is on a node that left the cluster")
                    self._lose(worker, f"node {worker.node} left the Ray cluster")
                await asyncio.sleep(POLL)
                continue
            if self._stopping:
                return
            if where["instance"] == seen["instance"]:
                if where["deaths"] > seen["deaths"]:  # its `serve` died; the actor starts it again
                    await self._serve_restarted(worker, actor, where)
                continue
            # A new actor: Ray restarted it (the actor process died).
            self._gone(worker, "came back as a new actor")
            if not where["resumed"] or where["node"] != worker.node:
                self._lose(worker, f"worker {worker.index} started afresh on another node")
            await self._returned(worker, where)

    async def _serve_restarted(self, worker: Worker, actor: Any, where: dict[str, Any]) -> None:
        self._gone(worker, f"(pid {worker.pid}) exited; its actor starts it again on the same sockets")
        instance = where["instance"]
        while not self._stopping and not where["up"]:
            with contextlib.suppress(RayActorError, TimeoutError, GetTimeoutError):
                asked = actor.wait.remote(instance, where["deaths"], True, WAIT_SLICE)
                where = await _within(asked, WAIT_SLICE + CALL)
            if where["instance"] != instance:  # Ray restarted the actor meanwhile: `_watch` takes it
                return
        if not self._stopping:
            await self._returned(worker, where)

    def _gone(self, worker: Worker, what: str) -> None:
        worker.up = False
        logger.warning("webarena-live: worker %d (node %s) %s", worker.index, worker.node, what)
        assert self._events is not None
        self._events.worker_down(worker.index)

    async def _returned(self, worker: Worker, where: dict[str, Any]) -> None:
        """The worker answers again: its sessions resumed (cut short if it dies meanwhile), then up."""
        self._took(worker, where)
        worker.restarts += 1
        worker.revive()
        with contextlib.suppress(Exception):  # resume_on reports each session it cannot resume
            assert self._events is not None
            await self._events.resume_on(worker.index)
        worker.up = True
        logger.warning(
            "webarena-live: worker %d is back on node %s (pid %s)", worker.index, worker.node, worker.pid
        )

    def _lose(self, worker: Worker, reason: str) -> None:
        if not worker.node_lost:
            worker.node_lost = True
            assert self._events is not None
            self._events.worker_lost(worker.index, reason)

    def forget_port(self, index: int, port: int) -> None:
        if self.actors:
            self.actors[index].drop_port.remote(port)

    async def read_outputs(self, index: int, paths: list[str]) -> dict[str, bytes]:
        """A finished session's files from worker `index`'s node; `TimeoutError` past `READ_DEADLINE`."""
        found: dict[str, bytes] = await _within(self.actors[index].read_outputs.remote(paths), READ_DEADLINE)
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


async def _node_alive(node: str | None) -> bool:
    """Whether Ray counts `node` alive (True when the cluster does not answer within `CALL`: then
    nothing is known, and a session is reported lost only on Ray's word)."""
    try:
        nodes = await asyncio.wait_for(asyncio.to_thread(ray.nodes), CALL)
    except (TimeoutError, ConnectionError, RuntimeError):
        return True
    return any(entry["NodeID"] == node and entry["Alive"] for entry in nodes)


async def _awaited(ref: Any) -> Any:
    """A Ray object ref (or a placement group's ready ref) as a cancellable asyncio awaitable."""
    return await asyncio.wrap_future(ref.future())


async def _within(ref: Any, seconds: float) -> Any:
    """A Ray call's result, or `TimeoutError` after `seconds`: no call to a worker waits for ever."""
    return await asyncio.wait_for(_awaited(ref), seconds)
