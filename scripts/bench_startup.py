#!/usr/bin/env python
"""How much a start of `webarena-live serve` costs: CPU and wall time from the command to an answered
`/health`, and on to the process's exit after SIGTERM, against plain `mitmdump` coming up on a port.

Every test of a proxy starts one, every worker of `serve --workers N` is one, and a restarted worker
is one more: the start is paid many times over. Each round starts, in turn, `serve` (demo tasks, its
own confdir, the session port off), the same from another tree's interpreter with `--old-python`
(a venv whose `webarena_live` is that tree's), and `mitmdump -q` (the baseline: mitmproxy alone). A
start counts the process's own CPU (user + system, from `wait4`) and the wall time until it answered;
the figures are medians over the rounds, and the ratios are taken round by round, so drift on a
shared machine falls on both sides.

    .venv/bin/python scripts/bench_startup.py [--rounds 8] [--old-python PATH]

Target: a `serve` start within 1.6x the CPU of plain mitmdump's. mitmproxy's own start (its addons
loaded and configured) is most of it; `serve` adds FastAPI (which also imports pydantic's v1 layer to
check each route's types), the evaluator, the control API, the task set and the app.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench_common import MITMDUMP, median, wait_for_port

from webarena_live.launch import free_ports

TARGET = 1.6


@dataclass(frozen=True)
class Start:
    cpu: float
    """Seconds of the process's own CPU, from its start to its exit."""
    up: float
    """Seconds of wall time from the command to the first answer."""


def start_once(argv: list[str], ready: Callable[[subprocess.Popen[bytes]], object]) -> Start:
    """Run `argv` until `ready` returns, then SIGTERM it and read its CPU from `wait4`."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # bytecode as users keep it
    began = time.perf_counter()
    process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        ready(process)
    except BaseException:
        process.kill()
        process.wait()
        raise
    up = time.perf_counter() - began
    process.send_signal(signal.SIGTERM)
    _, _, usage = os.wait4(process.pid, 0)
    process.returncode = 0  # reaped above
    return Start(cpu=usage.ru_utime + usage.ru_stime, up=up)


def serve_start(python: str, conf: Path) -> Start:
    proxy, control = free_ports(2)
    flags = ["--port", str(proxy), "--session-port", "off", "--control-port", str(control), "--quiet"]
    argv = [python, "-m", "webarena_live.commands.cli", "serve", *flags, "--set", f"confdir={conf}"]

    def answered(process: subprocess.Popen[bytes]) -> None:  # listening, then its first answer
        wait_for_port(control, process=process)
        with urllib.request.urlopen(f"http://127.0.0.1:{control}/health", timeout=60) as reply:
            reply.read()

    return start_once(argv, answered)


def mitmdump_start(conf: Path) -> Start:
    (port,) = free_ports(1)
    argv = [str(MITMDUMP), "-q", "--listen-host", "127.0.0.1", "--listen-port", str(port),
            "--set", f"confdir={conf}"]  # fmt: skip
    return start_once(argv, lambda process: wait_for_port(port, process=process))


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--old-python", metavar="PATH", help="another tree's interpreter, started alike")
    args = parser.parse_args()
    kinds = {"serve": lambda conf: serve_start(sys.executable, conf), "mitmdump": mitmdump_start}
    if args.old_python:
        kinds["serve (old tree)"] = lambda conf: serve_start(args.old_python, conf)
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as temp:
        confdir = Path(temp) / "conf"  # one CA for all: made by the warm-up, as a user's is made once
        for start in kinds.values():
            start(confdir)  # warm-up: bytecode written, the CA made, the page cache filled
        seen: dict[str, list[Start]] = {name: [] for name in kinds}
        for _ in range(args.rounds):
            for name, start in kinds.items():
                seen[name].append(start(confdir))
    print(f"{args.rounds} rounds; medians (the process's CPU from start to exit, wall time to its answer)")
    for name, starts in seen.items():
        cpu, up = median([s.cpu for s in starts]), median([s.up for s in starts])
        print(f"  {name:18} CPU {cpu:6.3f} s   up in {up:6.3f} s")
    ratio = median([s.cpu / b.cpu for s, b in zip(seen["serve"], seen["mitmdump"], strict=True)])
    print(f"serve / mitmdump, CPU per start: {ratio:.2f}x (target <= {TARGET}x)")
    if args.old_python:
        old = seen["serve (old tree)"]
        cpu = median([s.cpu / o.cpu for s, o in zip(seen["serve"], old, strict=True)])
        up = median([s.up / o.up for s, o in zip(seen["serve"], old, strict=True)])
        print(f"serve / the old tree's serve: CPU {cpu:.2f}x, up in {up:.2f}x")
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
