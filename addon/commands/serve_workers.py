"""`webarena-live serve --workers N [--ray ADDRESS]`: the command line read into a `FleetPlan`.

The fleet does the rest (`fleet/service.py`). Each worker is a `webarena-live serve` of its own with
every option of this command line but the front's own, on ports of its own, its control requests
through the proxy sent to the front (`webarena_front`). See docs/architecture.md, Workers.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path

from webarena_live.addresses.placement import PlacementError, PortRange
from webarena_live.evaluator import WebArenaLiveError
from webarena_live.fleet.service import FleetPlan, RayPlan, ray_problem, run_fleet
from webarena_live.launch import free_ports
from webarena_live.proxy.options import options_from_flags, with_flags
from webarena_live.replicas import parse_isolation, parse_lease_timeout

_FRONT_ONLY = frozenset(
    {"webarena_session_port", "webarena_control_port", "webarena_control_host", "webarena_session_ports",
     "webarena_control_token"}
)  # fmt: skip
"""Options the front keeps for itself: each worker gets its own ports, the token by environment.
`webarena_advertise_host` is passed on: a session's address is its worker's port on this machine."""

_CARRIED = frozenset(
    {"webarena_tasks", "webarena_config", "webarena_faults", "webarena_output_dir", "listen_host"}
)
"""Options each Ray worker gets its own value of: copies of the files, its node's folders and address."""


def worker_args(
    args: argparse.Namespace, index: int, front: str, *, skip: frozenset[str] = frozenset()
) -> list[str]:
    """The `serve` command line of worker `index` (its ports are added by `ServeProcess`); `front` is
    the HOST:PORT of the front's control API. Options named in `skip` are left to the engine (a Ray
    worker gets its own addresses, folders and copies of the files)."""
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
        argv += ["--web", "--web-port", str(args.worker_web_ports[index])]
    for setting in args.mitmproxy_options:
        if "confdir" not in skip or setting.partition("=")[0].strip() != "confdir":
            argv += ["--set", setting]
    return [*argv, "--set", f"webarena_front={front}"]


def carried_file(value: str | None) -> tuple[str, bytes] | None:
    """(name, content) of a `--tasks`/`--config` value naming a file here; None for a dataset name
    ('demo', 'webarena-verified') or no value."""
    if not value or not Path(value).expanduser().is_file():
        return None
    path = Path(value).expanduser()
    return path.name, path.read_bytes()


def plan_of(args: argparse.Namespace, count: int) -> FleetPlan | str:
    """The fleet `args` ask for, or why it cannot run (one line)."""
    options = options_from_flags(args)
    control_host, control_port = options["webarena_control_host"], options["webarena_control_port"]
    if not control_port:
        return (
            "--workers needs the control port (sessions start there and the workers answer to it): "
            "give --control-port a number, or 0 for any free port"
        )
    try:
        ports = PortRange.parse(args.session_ports) if args.session_ports else None
    except PlacementError as error:
        return f"--session-ports: {error}"
    if getattr(args, "web", False):
        picked = "web_port" in getattr(args, "picked_ports", ())  # `--web-port 0`: a free port for each
        if picked and args.ray:  # picked by each worker on its own machine (its banner line asks it)
            web = [0] * count
        elif picked:
            web = free_ports(count, args.listen_host)
        else:
            web = [int(args.web_port) + i for i in range(count)]
        args.worker_web_ports = web
    try:
        isolation = parse_isolation(args.isolation or "")
        lease_timeout = parse_lease_timeout(args.lease_timeout or "")
    except WebArenaLiveError as error:
        return str(error)
    if args.ray and options["webarena_advertise_host"]:  # each Ray worker answers its own node's address
        return "--advertise-host names one host; with --ray each worker's sessions are on its own node"
    ray: RayPlan | None = None
    if args.ray:
        planned = _ray_plan(args)
        if isinstance(planned, str):
            return planned
        ray = planned
    return FleetPlan(
        count=count, listen_host=args.listen_host, port=args.port, session_port=args.session_port or None,
        control_host=control_host, control_port=control_port,
        worker_argv=lambda index, front: worker_args(args, index, front),
        session_ports=ports, token=args.control_token or None,
        web_ports=tuple(args.worker_web_ports) if getattr(args, "web", False) else None, ray=ray,
        tasks=args.tasks, config=args.config, isolation=isolation, lease_timeout=lease_timeout,
        reset_at_start=bool(getattr(args, "reset_at_start", False)), output_dir=args.output_dir,
        confine=bool(getattr(args, "confine", False)),
        faults=str(Path(args.faults).expanduser().resolve()) if getattr(args, "faults", None) else None,
    )  # fmt: skip


def _ray_plan(args: argparse.Namespace) -> RayPlan | str:
    from webarena_live.proxy.certificates import ca_files

    faults = getattr(args, "faults", None)
    carried = (("--tasks", args.tasks), ("--config", args.config), ("--faults", faults))
    files = {flag: found for flag, value in carried if (found := carried_file(value)) is not None}
    if args.config and "--config" not in files:  # a site map is a file; every worker needs its copy
        return f"--config {args.config}: no such file"
    if faults and "--faults" not in files:
        return f"--faults {faults}: no such file"
    named = ["--tasks", args.tasks] if args.tasks and "--tasks" not in files else []  # a dataset name
    skip = _CARRIED | {"confdir"}  # the CA is carried

    def argv(index: int, front: str) -> list[str]:
        return [*named, *worker_args(args, index, front, skip=skip)]

    return RayPlan(
        address=args.ray, worker_argv=argv, files=files, ca=ca_files(args.mitmproxy_options),
        output_dir=args.output_dir, tasks=args.tasks,
    )  # fmt: skip


def run(args: argparse.Namespace, count: int) -> int:
    if args.ray and (problem := ray_problem()):
        print(f"webarena-live serve: {problem}", file=sys.stderr)
        return 2
    logging.getLogger("webarena_live").setLevel(logging.INFO)
    logging.basicConfig(format="[%(asctime)s.%(msecs)03d] %(message)s", datefmt="%H:%M:%S", stream=sys.stdout)
    plan = plan_of(args, count)
    if isinstance(plan, str):
        print(f"webarena-live serve: {plan}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(run_fleet(plan))
    except KeyboardInterrupt:
        return 130
