#!/usr/bin/env python
"""Scale in open sessions, measured: what a request, a start and a finish cost with 20 to 1,000 sessions
open on one worker (and on two), as a training loop opens them (a GRPO group, many rollouts at once).

Per set-up (`webarena-live serve`, pinned to the first CPU as the other benchmarks pin the proxy, or
`serve --workers 2`, free to use every CPU) and per number of open sessions N, in a proxy of its own
(one per N, all running at once, so the load rounds take turns between them and drift on a shared
machine falls on every N alike):

1. N sessions started one after another (`POST /sessions`, each answers its own proxy address):
   start latency p50 / p99; the proxy processes' RSS before and after, per open session;
2. plain HTTP agents, each on its own session address, against the local upstream server: a new
   connection per request (as the issue's client did, so every request pays the per-connection
   path), `--connections` at a time, for `--seconds`, from a load process on the other CPU(s):
   requests/s, the median of `--rounds` runs;
3. every session finished one after another: finish latency p50 / p99.

Each figure is given with its ratio to the same set-up's figure at 20 sessions, in the same run.
With 20 sessions open, the p99 of their 20 starts is the slowest one; so, before step 3, `--probes`
more sessions (default 100) are started, used once through their own address and finished one at a
time beside the open ones, and their start and finish p50 / p99 are compared on as many samples at
every N (the second table).

    .venv/bin/python scripts/bench_sessions.py [--sizes 20,100,500,1000] [--workers 1,2]
                                               [--seconds S] [--rounds R] [--connections C] [--probes P]
    .venv/bin/python scripts/bench_sessions.py claims [--sizes 20,1000] [--cycles 200]

`claims`: what opening and closing one session's address costs in the proxy itself, with N others
open, without HTTP round trips: `SessionAddresses.claim`, `release` and `settle` in-process on a real
mitmproxy (`DumpMaster` with the addon), p50 / p90 / p99 of `--cycles` cycles per N.

Targets: at 1,000 open sessions one worker keeps >= 0.9x its request rate at 20; start and finish
p99 within 1.2x of their figures at 20 (the second table: as many samples at every N); memory per open
session stated.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_common as bench

TASK_ID = 1005
NAVIGATED = {"task_type": "NAVIGATE", "status": "SUCCESS", "retrieved_data": None}


def _pids(proxy: bench.Proxy) -> list[int]:
    health = bench.control(proxy.control_port, "GET", "/health")
    return [proxy.pid, *(worker["pid"] for worker in health.get("workers", []))]


def _timed(port: int, method: str, path: str, body: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    answer = bench.control(port, method, path, body)
    return time.perf_counter() - started, answer


def open_sessions(proxy: bench.Proxy, sessions: int, url: str) -> dict[str, Any]:
    """`sessions` started one after another: start latencies, their addresses' ports, RSS per session."""
    pids = _pids(proxy)
    # One session started, used and finished first: the first start's and finish's one-time work
    # (imports, the first listener, the evaluator's first run) is no latency of N open sessions.
    started = bench.control(
        proxy.control_port, "POST", "/sessions", {"task_id": TASK_ID, "session": "warm-up"}
    )
    _load([int(started["proxy"].rsplit(":", 1)[1])], url, connections=1, seconds=0)
    bench.control(proxy.control_port, "POST", "/sessions/warm-up/finish", NAVIGATED)
    rss_before = sum(bench.rss_bytes(pid) for pid in pids)
    starts, ports = [], []
    for index in range(sessions):
        took, started = _timed(proxy.control_port, "POST", "/sessions",
                               {"task_id": TASK_ID, "session": f"agent-{index}", "run": "bench"})  # fmt: skip
        starts.append(took)
        ports.append(int(started["proxy"].rsplit(":", 1)[1]))
    rss_open = sum(bench.rss_bytes(pid) for pid in pids)
    return {
        "ports": ports,
        "start_p50": bench.percentile(starts, 0.5) * 1e3,
        "start_p99": bench.percentile(starts, 0.99) * 1e3,
        "rss_per_session_kib": (rss_open - rss_before) / sessions / 1024,
        "rss_mib": rss_open / 2**20,
    }


def finish_sessions(proxy: bench.Proxy, sessions: int) -> dict[str, float]:
    """Every session finished one after another: finish latencies."""
    finishes = []
    for index in range(sessions):
        took, _ = _timed(proxy.control_port, "POST", f"/sessions/agent-{index}/finish", NAVIGATED)
        finishes.append(took)
    return {
        "finish_p50": bench.percentile(finishes, 0.5) * 1e3,
        "finish_p99": bench.percentile(finishes, 0.99) * 1e3,
    }


def probe_sessions(proxies: dict[int, bench.Proxy], probes: int, url: str) -> dict[int, dict[str, float]]:
    """`probes` more sessions per proxy, each started, sent one request through its own address and
    finished, one after another, while the others stay open: start and finish latencies of as many
    samples at every N (the p99 of N = 20 sessions above is their slowest one). The proxies take
    turns probe by probe, so drift on a shared machine falls on every N alike."""
    starts: dict[int, list[float]] = {size: [] for size in proxies}
    finishes: dict[int, list[float]] = {size: [] for size in proxies}
    for index in range(probes):
        name = f"probe-{index}"
        for size, proxy in proxies.items():
            took, started = _timed(proxy.control_port, "POST", "/sessions",
                                   {"task_id": TASK_ID, "session": name, "run": "bench"})  # fmt: skip
            starts[size].append(took)
            _one_request(int(started["proxy"].rsplit(":", 1)[1]), url)
            took, _ = _timed(proxy.control_port, "POST", f"/sessions/{name}/finish", NAVIGATED)
            finishes[size].append(took)
    return {
        size: {
            "probe_start_p50": bench.percentile(starts[size], 0.5) * 1e3,
            "probe_start_p99": bench.percentile(starts[size], 0.99) * 1e3,
            "probe_finish_p50": bench.percentile(finishes[size], 0.5) * 1e3,
            "probe_finish_p99": bench.percentile(finishes[size], 0.99) * 1e3,
        }
        for size in proxies
    }


def _one_request(port: int, url: str) -> None:
    """One GET of `url` through the proxy on `port`, on a connection of its own."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as connection:
        host = url.split("/")[2]
        connection.sendall(f"GET {url} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    if not answer.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(f"a probe's request through port {port} failed: {answer[:80]!r}")


def measure(
    workers: int, sizes: list[int], url: str, options: list[str], args: argparse.Namespace
) -> dict[int, dict[str, Any]]:
    """One proxy per size, all running at once (each with its sessions open); the load rounds take
    turns between them, so drift on a shared machine falls on every size alike."""
    extra = ["--workers", str(workers)] if workers > 1 else []
    cpus = bench.CPUS if workers > 1 else (bench.PROXY_CPU,)
    proxies = {
        size: bench.Proxy(serve=True, serve_options=options, serve_args=extra, cpus=cpus) for size in sizes
    }
    figures: dict[int, dict[str, Any]] = {}
    try:
        for size, proxy in proxies.items():
            proxy.start()
            figures[size] = open_sessions(proxy, size, url)
            # Warm-up: each agent's first page (every session has an event to be judged on).
            _load(figures[size]["ports"], url, connections=args.connections, seconds=0)
        rates: dict[int, list[float]] = {size: [] for size in sizes}
        errors = dict.fromkeys(sizes, 0)
        for _ in range(args.rounds):
            for size in sizes:
                got = _load(figures[size]["ports"], url, connections=args.connections, seconds=args.seconds)
                rates[size].append(got["rps"])
                errors[size] += got["errors"]
        if args.probes:
            for size, probed in probe_sessions(proxies, args.probes, url).items():
                figures[size] |= probed
        for size, proxy in proxies.items():
            figures[size] |= finish_sessions(proxy, size)
            figures[size] |= {"rps": bench.median(rates[size]), "spread": bench.spread(rates[size]),
                              "errors": errors[size]}  # fmt: skip
            del figures[size]["ports"]
            print(f"  {workers} worker(s), {size:5} sessions: {json.dumps(figures[size])}", flush=True)
    finally:
        for proxy in proxies.values():
            proxy.stop()
    return figures


def _load(ports: list[int], url: str, *, connections: int, seconds: float) -> dict[str, Any]:
    command = [sys.executable, __file__, "load", "--url", url, "--ports", ",".join(map(str, ports)),
               "--connections", str(connections), "--seconds", str(seconds)]  # fmt: skip
    import subprocess

    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, text=True, preexec_fn=bench.pin(bench.HELPER_CPUS)
    )
    return bench.load_result(process, timeout=seconds + 120)


async def _agents(ports: list[int], url: str, connections: int, seconds: float) -> dict[str, Any]:
    """`connections` clients at once, each request on a new connection to the next session's address."""
    head = (
        f"GET {url} HTTP/1.1\r\nHost: {url.split('/')[2]}\r\nAccept: text/html\r\nConnection: close\r\n\r\n"
    )
    request = head.encode()
    once = not seconds  # 0 s: one request through each address, then stop
    turn = iter(ports) if once else itertools.cycle(ports)
    done, errors = 0, 0
    deadline = time.monotonic() + seconds

    async def agent() -> None:
        nonlocal done, errors
        while once or time.monotonic() < deadline:
            port = next(turn, None)
            if port is None:
                return
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(request)
                answer = await reader.read()
                writer.close()
                if answer.startswith(b"HTTP/1.1 200"):
                    done += 1
                else:
                    errors += 1
            except OSError:
                errors += 1

    started = time.monotonic()
    await asyncio.gather(*(agent() for _ in range(connections)))
    return {"requests": done, "errors": errors, "rps": done / (time.monotonic() - started)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="20,100,500,1000")
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--rounds", type=int, default=3, help="load runs per figure (their median)")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument(
        "--probes", type=int, default=100,
        help="sessions started and finished one at a time with the others open (their p50 / p99; 0: none)",
    )  # fmt: skip
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    print(bench.machine_line())
    work = Path(tempfile.mkdtemp(prefix="bench-sessions-"))
    rows: list[list[Any]] = []
    probes: list[list[Any]] = []
    with contextlib.ExitStack() as cleanup, bench.upstream() as port:
        cleanup.callback(shutil.rmtree, work, ignore_errors=True)  # the site map and the run's outputs
        url = f"http://127.0.0.1:{port}/"
        options = bench.harness_options(f"http://127.0.0.1:{port}", work)
        for workers in [int(w) for w in args.workers.split(",")]:
            figures = measure(workers, sizes, url, options, args)
            base = figures[sizes[0]]
            for size, got in figures.items():
                rows.append([
                    workers, size, f"{got['rps']:.0f}", got["spread"], f"{got['rps'] / base['rps']:.2f}x",
                    f"{got['start_p50']:.1f} / {got['start_p99']:.1f}",
                    f"{got['start_p99'] / base['start_p99']:.2f}x",
                    f"{got['finish_p50']:.1f} / {got['finish_p99']:.1f}",
                    f"{got['finish_p99'] / base['finish_p99']:.2f}x",
                    f"{got['rss_per_session_kib']:.0f}", f"{got['rss_mib']:.0f}", int(got["errors"]),
                ])  # fmt: skip
                if args.probes:
                    probes.append([
                        workers, size, f"{got['probe_start_p50']:.1f} / {got['probe_start_p99']:.1f}",
                        f"{got['probe_start_p99'] / base['probe_start_p99']:.2f}x",
                        f"{got['probe_finish_p50']:.1f} / {got['probe_finish_p99']:.1f}",
                        f"{got['probe_finish_p99'] / base['probe_finish_p99']:.2f}x",
                    ])  # fmt: skip
    bench.print_table(
        ["workers", "open sessions", "req/s", "spread", f"vs {sizes[0]}", "start p50 / p99 ms",
         f"vs {sizes[0]}", "finish p50 / p99 ms", f"vs {sizes[0]}", "RSS KiB / session", "RSS MiB", "errors"],
        rows,
    )  # fmt: skip
    if probes:
        print(
            f"\n{args.probes} sessions started, used once and finished one at a time beside the open ones:\n"
        )
        bench.print_table(
            ["workers", "open sessions", "start p50 / p99 ms", f"vs {sizes[0]}", "finish p50 / p99 ms",
             f"vs {sizes[0]}"],
            probes,
        )  # fmt: skip
    return 0


def load_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--ports", required=True)
    parser.add_argument("--connections", type=int, required=True)
    parser.add_argument("--seconds", type=float, required=True)
    args = parser.parse_args(argv)
    ports = [int(port) for port in args.ports.split(",")]
    print(json.dumps(asyncio.run(_agents(ports, args.url, args.connections, args.seconds))))
    return 0


async def _claims(sizes: list[int], cycles: int) -> None:
    from mitmproxy import options
    from mitmproxy.tools.dump import DumpMaster

    from webarena_live.launch import free_ports
    from webarena_live.proxy.addon import WebArenaLive

    work = Path(tempfile.mkdtemp(prefix="bench-claims-"))
    opts = options.Options()
    master = DumpMaster(opts, with_termlog=False, with_dumper=False)
    live = WebArenaLive()
    master.addons.add(live)
    (port,) = free_ports(1)
    opts.update(listen_host="127.0.0.1", mode=[f"regular@{port}"], confdir=str(work / "conf"),
                webarena_control_port=0, webarena_journal_dir=str(work / "journal"))  # fmt: skip
    if live.context is None:
        live.configure(set(opts.keys()))
    running = asyncio.get_running_loop().create_task(master.run())
    try:
        await asyncio.sleep(1)
        addresses, opened, first = live.addresses, 0, 0.0
        for size in sizes:
            while opened < size:
                await addresses.claim(f"open-{opened}")
                opened += 1
            took = []
            for index in range(cycles):
                started = time.perf_counter()
                await addresses.claim(f"probe-{index}")
                addresses.release(f"probe-{index}")
                await addresses.settle()
                took.append(time.perf_counter() - started)
            p50, p90, p99 = (bench.percentile(took, share) * 1e3 for share in (0.5, 0.9, 0.99))
            first = first or p99
            print(f"{size:5} open: claim + release p50 {p50:.2f} ms, p90 {p90:.2f} ms, p99 {p99:.2f} ms "
                  f"({p99 / first:.2f}x the first size's p99)", flush=True)  # fmt: skip
    finally:
        master.shutdown()
        await running
        shutil.rmtree(work, ignore_errors=True)


def claims_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="20,1000")
    parser.add_argument("--cycles", type=int, default=200)
    args = parser.parse_args(argv)
    print(bench.machine_line())
    asyncio.run(_claims([int(size) for size in args.sizes.split(",")], args.cycles))
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["load"]:
        sys.exit(load_main(sys.argv[2:]))
    if sys.argv[1:2] == ["claims"]:
        sys.exit(claims_main(sys.argv[2:]))
    sys.exit(main())
