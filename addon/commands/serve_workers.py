"""`webarena-live serve --workers N`: N proxy processes behind one control port.

This process runs no mitmproxy: it serves the control API (`fleet/front_app.py`), carries the shared
proxy ports to the workers (`fleet/router.py`) and keeps the workers running (`fleet/workers.py`).
Each worker is a `webarena-live serve` of its own with every option of this command line, on
ports of its own, its control requests through the proxy sent here (`webarena_front`). See
docs/architecture.md, Workers.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from webarena_live.addon.control.context import RESERVED_HOST
from webarena_live.addon.control.server import ControlServer
from webarena_live.addon.fleet.front import Front
from webarena_live.addon.fleet.front_app import create_front_app
from webarena_live.addon.fleet.placement import Placement, PlacementError, PortRange
from webarena_live.addon.fleet.router import SharedPort
from webarena_live.addon.fleet.workers import WorkerPool, Workers
from webarena_live.addon.proxy.options import CONTROL_TOKEN_ENV, options_from_flags, with_flags
from webarena_live.evaluator import WebArenaLiveError, __version__
from webarena_live.launch import LaunchError, free_ports

logger = logging.getLogger("webarena_live.addon.fleet")

_FRONT_ONLY = frozenset(
    {"webarena_session_port", "webarena_control_port", "webarena_control_host", "webarena_session_ports",
     "webarena_control_token"}
)  # fmt: skip
"""Options the front keeps for itself: each worker gets its own ports, the token by environment."""


def worker_args(
    args: argparse.Namespace, index: int, front: str, *, skip: frozenset[str] = frozenset()
) -> list[str]:
    """The `serve` command line of worker `index` (its ports are added by `ServeProcess`); `front` is
    the HOST:PORT of this process's control API. Options named in `skip` are left to the engine (a
    Ray worker gets its own addresses, folders and copies of the files)."""
    argv = [] if "listen_host" in skip else ["--listen-host", args.listen_host, "--control-host", "127.0.0.1"]
    for option in with_flags():
        value = getattr(args, option.dest or "", None)
        if option.name in _FRONT_ONLY | skip or value is None or value is False:
            continue
        argv += [f"--{option.flag}"] if value is True else [f"--{option.flag}", str(value)]
    if args.quiet:
        argv.append("--quiet")
    if not args.gc_tuning:
        argv.append("--no-gc-tuning")
    if getattr(args, "web", False):
        argv += ["--web", "--web-port", str(web_port(args, index))]
    for setting in args.mitmproxy_options:
        argv += ["--set", setting]
    return [*argv, "--set", f"webarena_front={front}"]


def web_port(args: argparse.Namespace, index: int) -> int:
    """Worker `index`'s mitmweb port: `--web-port` counted up, or one the system picked for each."""
    picked: list[int] | None = getattr(args, "worker_web_ports", None)
    return picked[index] if picked else int(args.web_port) + index


def _banner(args: argparse.Namespace, front: Front, server: ControlServer, health: dict[str, object]) -> str:
    host = args.listen_host
    lines = [
        f"webarena-live {__version__}: {health.get('tasks')} tasks from {health.get('tasks_source')}, "
        f"{len(front.pool.workers)} workers",
        f"  proxy port    http://{host}:{args.port}  (credentials optional; none: session 'default')",
    ]
    if args.session_port:
        lines.append(f"  session port  http://{host}:{args.session_port}  (asks for credentials)")
    ports = str(front.placement.ports) if front.placement.ports else "picked by the operating system"
    lines.append(f"  session addresses  one per session from POST /sessions (ports {ports})")
    lines.append(
        f"  control API   http://{server.host}:{server.port}/ and http://{RESERVED_HOST}/ through the proxy"
    )
    for worker in front.pool:
        web = (
            f", mitmweb http://127.0.0.1:{web_port(args, worker.index)}/"
            if getattr(args, "web", False)
            else ""
        )
        node = f", node {worker.node}" if worker.node else ""
        lines.append(
            f"  worker {worker.index}      pid {worker.pid}, control {worker.control_url}/{web}{node}"
        )
    if args.ray:
        outputs = front.outputs.output_dir if front.outputs is not None else None
        carried = f"{outputs}  (carried from each worker's node)" if outputs else "none (--output-dir DIR)"
        lines.append(f"  outputs       {carried}")
        lines.append("  journal       in each worker's node's temp directory")
        return "\n".join(lines)
    if health.get("output_dir"):
        lines.append(f"  outputs       {health['output_dir']}")
    lines.append(f"  journal       {health.get('journal_dir')}")
    return "\n".join(lines)


async def serve_workers(args: argparse.Namespace, count: int) -> int:
    if args.ray:
        from webarena_live.addon.commands.serve_ray import ray_problem

        if problem := ray_problem():
            print(f"webarena-live serve: {problem}", file=sys.stderr)
            return 2
    logging.getLogger("webarena_live").setLevel(logging.INFO)
    logging.basicConfig(format="[%(asctime)s.%(msecs)03d] %(message)s", datefmt="%H:%M:%S", stream=sys.stdout)
    options = options_from_flags(args)
    control_host, control_port = options["webarena_control_host"], options["webarena_control_port"]
    if not control_port:
        print(
            "webarena-live serve: --workers needs the control port (sessions start there and the "
            "workers answer to it): give --control-port a number, or 0 for any free port",
            file=sys.stderr,
        )
        return 2
    try:
        ports = PortRange.parse(args.session_ports) if args.session_ports else None
    except PlacementError as error:
        print(f"webarena-live serve: --session-ports: {error}", file=sys.stderr)
        return 2
    if getattr(args, "web", False) and "web_port" in getattr(args, "picked_ports", ()):
        args.worker_web_ports = free_ports(count, args.listen_host)  # `--web-port 0`: any free port, each
    reserved = frozenset({args.port, args.session_port, control_port})
    placement = Placement(count, ports=ports, host=args.listen_host, reserved=reserved)
    front = Front(placement)
    front.token = args.control_token or None
    app = create_front_app(front)
    server = ControlServer(app, host=control_host, port=control_port)
    try:
        await server.start()
    except OSError as error:
        print(f"webarena-live serve: cannot open the control port {control_port}: {error}", file=sys.stderr)
        return 1
    front.listening = {
        "proxy_port": args.port,
        "session_port": args.session_port or None,
        "control_port": server.port,
    }
    env = {CONTROL_TOKEN_ENV: args.control_token} if args.control_token else {}
    pool: Workers
    if args.ray:
        from webarena_live.addon.commands import serve_ray

        try:
            await asyncio.to_thread(serve_ray.connect, args.ray)
            pool = serve_ray.ray_pool(args, count, front, server.port, env)
        except (ConnectionError, WebArenaLiveError) as error:
            print(f"webarena-live serve: {error}", file=sys.stderr)
            await server.stop()
            return 1
        placement.is_free = lambda port: True  # a port is the worker's node's: its bind is the check
    else:
        pool = WorkerPool(
            count,
            lambda index: worker_args(args, index, f"127.0.0.1:{server.port}"),
            on_down=front.worker_down,
            on_restart=front.resume_on,
            env=env,
        )
    front.pool = pool
    shared = [SharedPort(placement, lambda i: (pool[i].host, pool[i].ports.proxy), challenges=False)]
    if args.session_port:
        shared.append(SharedPort(placement, lambda i: (pool[i].host, pool[i].ports.session), challenges=True))
    try:
        await shared[0].start(args.listen_host, args.port)
        if len(shared) > 1:
            await shared[1].start(args.listen_host, args.session_port)
        await pool.start()
    except OSError as error:
        print(f"webarena-live serve: cannot open a proxy port: {error}", file=sys.stderr)
        await _stop(shared, server, pool)
        return 1
    except LaunchError as error:
        await _stop(shared, server, pool)
        if args.ray:
            print(f"webarena-live serve: {error}", file=sys.stderr)
            return 1
        codes = [w.process.process.returncode for w in pool if w.process and w.process.process]
        code = next((code for code in codes if code), 1)
        print(
            f"webarena-live serve: a worker did not start (exit code {code}; its output is above)",
            file=sys.stderr,
        )
        return code
    front.ready = True
    health = (await front.http.get(f"{pool[0].control_url}/health", headers=_auth(front))).json()
    print(_banner(args, front, server, health), flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    await _stop(shared, server, pool)
    await front.http.aclose()
    return 0


def _auth(front: Front) -> dict[str, str]:
    return {"Authorization": f"Bearer {front.token}"} if front.token else {}


async def _stop(shared: list[SharedPort], server: ControlServer, pool: Workers) -> None:
    for port in shared:
        await port.stop()
    await pool.stop()
    await server.stop()


def run(args: argparse.Namespace, count: int) -> int:
    try:
        return asyncio.run(serve_workers(args, count))
    except KeyboardInterrupt:
        return 130
