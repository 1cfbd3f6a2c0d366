"""`webarena-live serve --workers N --ray ADDRESS`: the workers as Ray actors on a cluster's nodes.

Everything else is `serve --workers` (`serve_workers.py`): this process joins the cluster as a Ray
driver, serves the one control API, and keeps the output directory; the workers get copies of the
task and site files and of the proxy's CA (no shared file system is assumed), their own node's
addresses and folders, and send back each finished session's files (docs/architecture.md, Ray).
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import socket
import uuid
from pathlib import Path

from webarena_live.addon.commands.serve_workers import worker_args
from webarena_live.addon.control.run_view import run_figures
from webarena_live.addon.fleet.front import CarriedOutputs, Front
from webarena_live.addon.fleet.workers import Workers
from webarena_live.evaluator import load_tasks, prepare_output_dir

RAY_MISSING = "--ray needs Ray, which is not installed: pip install 'webarena-live[ray]'"
NAMESPACE = "webarena-live"
"""The Ray namespace of the fleet's actors (named `webarena-live-<fleet>-<index>`)."""
CPUS_PER_WORKER = 1.0
"""A worker is one proxy process: one core's work at most (its bundle in the placement group)."""

_CARRIED = frozenset({"webarena_tasks", "webarena_config", "webarena_output_dir", "listen_host"})
"""Options each Ray worker gets its own value of: copies of the files, its node's folders and address."""


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


def carried_file(value: str | None) -> tuple[str, bytes] | None:
    """(name, content) of a `--tasks`/`--config` value naming a file here; None for a dataset name
    ('demo', 'webarena-verified') or no value."""
    if not value or not Path(value).expanduser().is_file():
        return None
    path = Path(value).expanduser()
    return path.name, path.read_bytes()


def ca_files(mitmproxy_options: list[str]) -> dict[str, bytes]:
    """This machine's mitmproxy CA (made if there is none yet), for every worker: a browser that trusts
    it trusts each of them."""
    from mitmproxy.certs import CertStore  # the CA's files as mitmproxy makes and reads them

    confdir = Path("~/.mitmproxy")
    for setting in mitmproxy_options:
        name, _, value = setting.partition("=")
        if name.strip() == "confdir":
            confdir = Path(value)
    confdir = confdir.expanduser()
    CertStore.from_store(confdir, "mitmproxy", 2048)
    return {path.name: path.read_bytes() for path in confdir.glob("mitmproxy-ca*")}


def front_address(control_host: str, control_port: int) -> str:
    """HOST:PORT where workers on other nodes reach this process's control API."""
    host = control_host
    try:
        unspecified = not host or ipaddress.ip_address(socket.gethostbyname(host)).is_unspecified
    except (OSError, ValueError):
        raise ConnectionError(f"--control-host {host!r} is not an address this machine resolves") from None
    if unspecified:  # 0.0.0.0: this node's own address
        import ray

        host = ray.util.get_node_ip_address()
    return f"[{host}]:{control_port}" if ":" in host else f"{host}:{control_port}"


def connect(address: str) -> None:
    """Join the cluster as a driver (`auto`: the one this machine is in); `ConnectionError` naming it."""
    import ray

    try:
        ray.init(address=address, namespace=NAMESPACE, log_to_driver=True, logging_level=logging.WARNING)
    except (ConnectionError, RuntimeError, ValueError) as error:
        raise ConnectionError(f"cannot join the Ray cluster at {address!r}: {error}") from None


def ray_pool(
    args: argparse.Namespace, count: int, front: Front, control_port: int, env: dict[str, str]
) -> Workers:
    """The workers on the cluster (connected already), and the front told where their files come from."""
    from webarena_live.addon.fleet.ray_workers import RayWorkerPool, WorkerSetup

    front_at = front_address(args.control_host or "127.0.0.1", control_port)
    files = {flag: found for flag, value in (("--tasks", args.tasks), ("--config", args.config))
             if (found := carried_file(value)) is not None}  # fmt: skip
    own = [s for s in args.mitmproxy_options if s.partition("=")[0].strip() != "confdir"]  # the CA is carried
    plain = argparse.Namespace(**{**vars(args), "mitmproxy_options": own})
    per_worker = tuple(tuple(worker_args(plain, index, front_at, skip=_CARRIED)) for index in range(count))
    names = [*(["--tasks", args.tasks] if args.tasks and "--tasks" not in files else [])]
    setup = WorkerSetup(
        fleet=uuid.uuid4().hex[:12],
        args=tuple((*names, *argv) for argv in per_worker),
        files=files,
        ca=ca_files(args.mitmproxy_options),
        env=env,
        listen_host=None if _loopback(args.listen_host) else args.listen_host,
    )
    pool = RayWorkerPool(
        count, setup, cpus=CPUS_PER_WORKER, on_down=front.worker_down, on_lost=front.worker_lost,
        on_restart=front.resume_on,
    )  # fmt: skip
    if args.output_dir:
        output_dir = prepare_output_dir(args.output_dir)
        tasks = load_tasks(args.tasks) if args.tasks else load_tasks()
        front.outputs = CarriedOutputs(output_dir, lambda index: pool.output_dirs[index], pool.read_outputs)
        front.report = lambda run: run_figures(output_dir, tasks, run)
    return pool


def _loopback(host: str) -> bool:
    """Whether `host` is this machine only: then each worker listens on its own node's address."""
    try:
        return ipaddress.ip_address(socket.gethostbyname(host)).is_loopback
    except (OSError, ValueError):
        return False
