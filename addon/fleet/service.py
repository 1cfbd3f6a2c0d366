"""`serve --workers N [--ray ADDRESS]` once its command line is read: the front, its ports and its workers.

This process runs no mitmproxy: it serves the control API (`front/app.py`), carries the shared proxy
ports to the workers (`router.py`) and keeps the workers running, as local processes (`workers.py`)
or as Ray actors on a cluster's nodes (`ray_workers.py`). `commands/serve_workers.py` turns the command
line into a `FleetPlan`; everything after that is here. See docs/architecture.md, Workers and Ray.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import cast

from fastapi import FastAPI

from webarena_live.addresses.credentials import CONTROL_TOKEN_ENV, WEB_TOKEN_ENV, mitmweb_url
from webarena_live.addresses.placement import Placement, PortRange
from webarena_live.control.context import RESERVED_HOST
from webarena_live.control.server import ControlServer
from webarena_live.evaluator import (
    SiteMap,
    TaskSet,
    WebArenaLiveError,
    __version__,
    load_tasks,
    prepare_output_dir,
)
from webarena_live.fleet.front import liveness
from webarena_live.fleet.front.app import create_front_app
from webarena_live.fleet.front.door import WorkersDoor
from webarena_live.fleet.front.front import Front
from webarena_live.fleet.front.leases import FrontLeases
from webarena_live.fleet.front.link import CALL_DEADLINE, WorkerLink
from webarena_live.fleet.front.registry import SessionRegistry
from webarena_live.fleet.front.router import SharedPort
from webarena_live.fleet.workers.local import LocalWorkers, Workers
from webarena_live.launch import LaunchError
from webarena_live.replicas import Isolation
from webarena_live.replicas.build import build_pool, pool_file
from webarena_live.runs.fault_plan import plan_line
from webarena_live.runs.sessions import NoticeKind
from webarena_live.sites import CopyKeeper, load_site_map

logger = logging.getLogger("webarena_live.fleet")

RAY_MISSING = "--ray needs Ray, which is not installed: pip install 'webarena-live[ray]'"


@dataclass(frozen=True)
class RayPlan:
    """What `--ray` adds: the cluster, and what each worker gets carried to its node."""

    address: str
    worker_argv: Callable[[int, str], list[str]]
    """Worker `index`'s `serve` flags given the front's HOST:PORT, without what a node gives itself
    (its address, folders and the copies of the files below)."""
    files: dict[str, tuple[str, bytes]] = field(default_factory=dict)
    """Flag -> (file name, content) of the `--tasks`/`--config` files."""
    ca: dict[str, bytes] = field(default_factory=dict)
    """The front's mitmproxy CA files, so a browser that trusts one worker trusts all."""
    output_dir: str | None = None
    tasks: str | None = None
    """The `--tasks` value (a file or a dataset name), for the report of the carried outputs."""


@dataclass(frozen=True)
class FleetPlan:
    """Everything `serve --workers N` was asked for, read from its command line."""

    count: int
    listen_host: str
    port: int
    session_port: int | None
    control_host: str
    control_port: int
    worker_argv: Callable[[int, str], list[str]]
    """Worker `index`'s `serve` flags given the front's HOST:PORT (its ports are added at launch)."""
    session_ports: PortRange | None = None
    token: str | None = None
    web_ports: tuple[int, ...] | None = None
    """Each worker's mitmweb port, with `--web`."""
    ray: RayPlan | None = None
    tasks: str | None = None
    """`--tasks` (a file or a dataset name): the front leases replicas by its tasks' sites."""
    config: str | None = None
    """`--config`: the site map whose replicas the front leases."""
    isolation: Isolation | None = None
    lease_timeout: float | None = None
    confine: bool = False
    """`--confine` (the workers apply it; the banner names it)."""
    reset_at_start: bool = False
    """`--reset-at-start`: the front resets every replica before the first lease."""
    output_dir: str | None = None
    """`--output-dir`: where the front keeps the pool's state (a restart reads it) and counters."""
    faults: str | None = None
    """`--faults FILE`, its absolute path: the workers' plan's `source` (a Ray worker reads a copy)."""


def ray_problem() -> str | None:
    """Why `--ray` cannot run here (Ray is not installed, or cannot be imported), or None."""
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")  # every worker's log line as it is: none is a repeat
    try:
        import ray  # noqa: F401  (what --ray runs on: imported now, so a missing extra is told first)
    except ModuleNotFoundError as error:
        if error.name == "ray" or (error.name or "").startswith("ray."):
            return RAY_MISSING
        return f"--ray: Ray cannot be imported: {error}"
    except ImportError as error:
        return f"--ray: Ray cannot be imported: {error}"
    return None


async def run_fleet(plan: FleetPlan) -> int:
    """Serve until SIGINT or SIGTERM; the exit code. Problems are told on stderr in one line."""
    placement = Placement(
        plan.count, ports=plan.session_ports, host=plan.listen_host,
        reserved=frozenset({plan.port, plan.session_port or 0, plan.control_port}),
    )  # fmt: skip
    try:
        leases = front_leases(plan)
    except WebArenaLiveError as error:
        for line in str(error).splitlines():
            print(f"webarena-live serve: {line}", file=sys.stderr)
        return 2
    env = {CONTROL_TOKEN_ENV: plan.token} if plan.token else {}
    web_token = None
    if plan.web_ports:
        # mitmproxy 11.1 and later ask mitmweb's visitors for a token: the workers' is this one (11.0
        # asks for none and ignores it in the address)
        web_token = env[WEB_TOKEN_ENV] = secrets.token_hex(16)
    workers: Workers
    outputs, report, worker_token = None, None, None
    if plan.ray is not None:
        from webarena_live.fleet.workers import ray_workers

        # The workers listen on their nodes' addresses, so their control APIs need a token even when
        # this one (on loopback) has none: the front makes it, and lets them in at a door of their own.
        worker_token = env[CONTROL_TOKEN_ENV] = plan.token or secrets.token_urlsafe(24)
        try:
            await asyncio.to_thread(ray_workers.connect, plan.ray.address)
            workers, outputs, report = ray_workers.ray_workers(plan, env)
        except (ConnectionError, WebArenaLiveError, OSError) as error:
            return _told(str(error), 1)
        placement.is_free = lambda port: True  # a port is the worker's node's: its bind is the check
    else:
        workers = LocalWorkers(plan.count, plan.worker_argv, env=env, listen_host=plan.listen_host)
    registry = SessionRegistry(outputs, report)
    # the replica pool's notices in the merged event stream
    leases.pool.on_change = lambda session, notice: registry.announce(
        NoticeKind.POOL, {"session": session, **notice}
    )
    leases.authority.start()  # the resets a restart (or --reset-at-start) calls for, first
    link = WorkerLink(workers, placement, registry.starts, token=plan.token, worker_token=worker_token)
    front = Front(workers, placement, link, registry, leases)
    front.faults_file = plan.faults
    app = create_front_app(front)
    server = ControlServer(app, host=plan.control_host, port=plan.control_port)
    servers = [server]
    try:
        await server.start()
    except OSError as error:
        return _told(f"cannot open the control port {plan.control_port}: {error}", 1)
    front.listening.update(proxy_port=plan.port, session_port=plan.session_port, control_port=server.port)
    front_at = f"127.0.0.1:{server.port}"
    if plan.ray is not None:
        assert worker_token is not None
        try:
            door = ControlServer(cast(FastAPI, WorkersDoor(app, worker_token)),
                                 host=ray_workers.node_address(), port=0)  # fmt: skip
            await door.start()
        except OSError as error:
            await server.stop()
            return _told(str(error), 1)
        servers.append(door)
        front_at = ray_workers.host_port(door.host, door.port)
    shared = [SharedPort(placement, lambda i: (workers[i].host, workers[i].ports.proxy), challenges=False)]
    if plan.session_port:
        sessions_at = SharedPort(
            placement, lambda i: (workers[i].host, workers[i].ports.session), challenges=True
        )
        shared.append(sessions_at)
    try:
        await shared[0].start(plan.listen_host, plan.port)
        if len(shared) > 1:
            await shared[1].start(plan.listen_host, plan.session_port or 0)
        await workers.start(front.recovery, front_at)
    except OSError as error:
        await _stop(shared, servers, workers)
        return _told(f"cannot open a proxy port: {error}", 1)
    except LaunchError as error:
        await _stop(shared, servers, workers)
        if plan.ray is not None:
            return _told(str(error), 1)
        codes = [w.process.process.returncode for w in workers if w.process and w.process.process]
        code = next((code for code in codes if code), 1)
        return _told(f"a worker did not start (exit code {code}; its output is above)", code)
    front.ready = True
    watch = asyncio.get_running_loop().create_task(leases.watch(link, link.up_workers))
    health = await link.health(workers[0], CALL_DEADLINE) or {}  # a worker that just started answers
    if plan.web_ports and 0 in plan.web_ports:  # each worker picked its mitmweb port on its machine
        replies = [await link.health(w, CALL_DEADLINE) or {} for w in workers]
        plan = replace(plan, web_ports=tuple(int(reply.get("web_port") or 0) for reply in replies))
    print(banner(plan, front, servers, health, web_token), flush=True)
    watching = asyncio.create_task(liveness.watch(front))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    watching.cancel()
    watch.cancel()
    await _stop(shared, servers, workers)
    await leases.pool.close()
    await link.close()
    return 0


def front_leases(plan: FleetPlan) -> FrontLeases:
    """The front's replica pool, from the same tasks and site map as the workers' (without a site map,
    an empty pool: it leases nothing, as a single process's). `WebArenaLiveError` (one line per problem)
    when they cannot be read or cannot be leased."""
    site_map, copies = load_site_map(plan.config) if plan.config else (SiteMap(), None)
    output_dir = prepare_output_dir(plan.output_dir) if plan.output_dir else None
    # remembered in the output directory, or with a site map in the state directory; an empty pool
    # without one has nothing to remember there (nothing of a run outlives it)
    state_file = pool_file(output_dir) if output_dir is not None or plan.config else None
    pool = build_pool(
        site_map, plan.isolation, plan.lease_timeout,
        state_file=state_file, reset_at_start=plan.reset_at_start,
        keeper=CopyKeeper(copies) if copies is not None else None,  # the front owns the copies
    )  # fmt: skip

    def tasks() -> TaskSet:
        return load_tasks(plan.tasks) if plan.tasks else load_tasks()

    # with a site map its tasks' problems are told now, with the map's; without, by the workers
    return FrontLeases(pool, tasks() if plan.config else tasks)


def banner(
    plan: FleetPlan,
    front: Front,
    servers: list[ControlServer],
    health: dict[str, object],
    web_token: str | None,
) -> str:
    """What the front prints once every worker answers: its ports, its workers, where files go."""
    host, server = plan.listen_host, servers[0]
    lines = [
        f"webarena-live {__version__}: {health.get('tasks')} tasks from {health.get('tasks_source')}, "
        f"{len(front.workers)} workers",
        f"  proxy port    http://{host}:{plan.port}  (credentials optional; none: session 'default')",
    ]
    if plan.session_port:
        lines.append(f"  session port  http://{host}:{plan.session_port}  (asks for credentials)")
    ports = str(front.placement.ports) if front.placement.ports else "picked by the operating system"
    lines.append(f"  session addresses  one per session from POST /sessions (ports {ports})")
    lines.append(
        f"  control API   http://{server.host}:{server.port}/ and http://{RESERVED_HOST}/ through the proxy"
    )
    for worker in front.workers:
        web = f", mitmweb {mitmweb_url(plan.web_ports[worker.index], web_token)}" if plan.web_ports else ""
        node = f", node {worker.node}" if worker.node else ""
        # A Ray worker by the pid Ray prints beside its lines (its actor's); its `serve` child's after.
        pid = f"{worker.actor_pid} (serve {worker.pid})" if worker.actor_pid is not None else str(worker.pid)
        lines.append(f"  worker {worker.index}      pid {pid}, control {worker.control_url}/{web}{node}")
    if isinstance(faults := health.get("faults"), dict):
        lines.append(plan_line({**faults, "source": plan.faults or faults.get("source")}))
    if (leases := front.leases.authority.banner(confine=plan.confine)) is not None:
        lines.append(leases)
    if plan.ray is not None:
        outputs = front.registry.outputs.output_dir if front.registry.outputs is not None else None
        carried = f"{outputs}  (carried from each worker's node)" if outputs else "none (--output-dir DIR)"
        lines.append(f"  outputs       {carried}")
        lines.append("  journal       in each worker's node's temp directory")
        for door in servers[1:]:
            door_url = f"http://{door.host}:{door.port}/"
            lines.append(
                f"  workers' door {door_url}  (control requests from the workers, with the fleet's token)"
            )
        return "\n".join(lines)
    if health.get("output_dir"):
        lines.append(f"  outputs       {health['output_dir']}")
    lines.append(f"  journal       {health.get('journal_dir')}")
    return "\n".join(lines)


def _told(problem: str, code: int) -> int:
    print(f"webarena-live serve: {problem}", file=sys.stderr)
    return code


async def _stop(shared: list[SharedPort], servers: list[ControlServer], workers: Workers) -> None:
    for port in shared:
        await port.stop()
    await workers.stop()
    for server in servers:
        await server.stop()
