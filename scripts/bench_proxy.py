#!/usr/bin/env python
"""Throughput and added latency of `mitmdump` with the webarena-live addon vs the same `mitmdump` without.

Two `mitmdump` processes run side by side for the whole benchmark, pinned to
the same CPU: the baseline (plain mitmproxy) and the same command with
`-s addon/entry.py`, whose traffic lands in a running session of a task (so
every flow is captured, journaled, spooled and offered to evaluation). A
local asyncio upstream answers small responses; the load generators run in
their own processes on the other CPU.

Both proxies are loaded *at the same time*: on a shared, noisy machine the
load drifts from second to second, and only figures taken in the same
seconds compare. Two CPU-bound processes on one CPU get equal shares, so the
ratio of their requests/s is the ratio of their per-request costs. Per round:

- throughput: `--connections` keep-alive clients per proxy, sending requests
  back to back for `--seconds`; requests/s, and each proxy's CPU time per
  request (from /proc);
- latency: one client per proxy, one request at a time; p50 and p99 of the round trip.

    .venv/bin/python scripts/bench_proxy.py [--quick] [--rounds N] [--seconds S] [--connections C]

Targets: throughput >= 0.95x the baseline; added latency p50 <= +0.3 ms, p99 <= +2 ms.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_common as bench

SESSION = "bench"
TASK_ID = 1005
"""The demo task the session runs: a mutate task whose network evaluator looks at POST events."""


def measure(
    proxies: dict[bool, bench.Proxy], url: str, *, connections: int, seconds: float
) -> dict[bool, Any]:
    """One round: both proxies under the same load at the same time, then both latency runs at once."""
    figures: dict[bool, dict[str, float]] = {False: {}, True: {}}
    cpu_before = {key: bench.cpu_seconds(proxy.pid) for key, proxy in proxies.items()}
    loads = {
        key: bench.start_load(proxy.port, url, connections=connections, seconds=seconds, session=SESSION)
        for key, proxy in proxies.items()
    }
    for key, process in loads.items():
        result = bench.load_result(process, timeout=seconds + 120)
        cpu = bench.cpu_seconds(proxies[key].pid) - cpu_before[key]
        figures[key].update(rps=result["rps"], cpu_us=cpu / result["requests"] * 1e6)
    latency = {
        key: bench.start_load(proxy.port, url, connections=1, seconds=seconds / 2, session=SESSION)
        for key, proxy in proxies.items()
    }
    for key, process in latency.items():
        result = bench.load_result(process, timeout=seconds + 120)
        figures[key].update(p50=result["p50_ms"], p99=result["p99_ms"])
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="2 rounds of 3 s (under a minute)")
    parser.add_argument("--rounds", type=int, help="rounds per proxy (default 6; quick: 2)")
    parser.add_argument(
        "--seconds", type=float, help="seconds of load per throughput run (default 8; quick: 3)"
    )
    parser.add_argument(
        "--connections", type=int, default=32, help="keep-alive clients per proxy in throughput runs"
    )
    parser.add_argument(
        "--task",
        type=int,
        default=TASK_ID,
        help="demo task of the captured session (1004: "
        "an evaluator without a method filter, which prepares its verdict on every event)",
    )
    args = parser.parse_args()
    rounds = args.rounds or (2 if args.quick else 6)
    seconds = args.seconds or (3.0 if args.quick else 8.0)

    print(bench.machine_line())
    results: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    with bench.upstream(size=512) as upstream_port:
        url = f"http://127.0.0.1:{upstream_port}/api/items?page=1"
        with bench.Proxy(addon=False) as baseline, bench.Proxy(addon=True) as live:
            bench.control(live.control_port, "POST", "/sessions", {"task_id": args.task, "session": SESSION})
            proxies = {False: baseline, True: live}
            # Warm both up (imports, first connections) before anything counts.
            for proxy in proxies.values():
                bench.run_load(proxy.port, url, connections=4, seconds=1.0, session=SESSION)
            for index in range(rounds):
                round_figures = measure(proxies, url, connections=args.connections, seconds=seconds)
                for with_addon in (False, True):
                    figures = round_figures[with_addon]
                    results[with_addon].append(figures)
                    name = "addon   " if with_addon else "baseline"
                    print(f"  round {index + 1} {name}: {figures['rps']:8.1f} req/s, "
                          f"{figures['cpu_us']:7.0f} us CPU/req, p50 {figures['p50']:6.2f} ms, "
                          f"p99 {figures['p99']:7.2f} ms", flush=True)  # fmt: skip
            captured = bench.control(live.control_port, "GET", f"/sessions/{SESSION}")["counts"]["total"]

    print(
        f"\n{rounds} rounds, {seconds:g} s throughput runs with {args.connections} connections; "
        f"{captured:,} events captured by the addon; medians, per-round min..max in brackets\n"
    )
    rows = []

    def column(with_addon: bool, key: str) -> list[float]:
        return [r[key] for r in results[with_addon]]

    def paired(key: str) -> list[float]:
        return [a[key] / b[key] for a, b in zip(results[True], results[False], strict=True)]

    def deltas(key: str) -> list[float]:
        return [a[key] - b[key] for a, b in zip(results[True], results[False], strict=True)]

    rps_ratio = paired("rps")
    cpu_ratio = [1 / r for r in paired("cpu_us")]
    rows.append(_row("throughput (req/s)", column(False, "rps"), column(True, "rps"), rps_ratio, "x",
                     ">= 0.95x"))  # fmt: skip
    rows.append(_row("throughput from CPU/req", column(False, "cpu_us"), column(True, "cpu_us"), cpu_ratio,
                     "x", ">= 0.95x", unit=" us"))  # fmt: skip
    rows.append(_row("latency p50 (ms)", column(False, "p50"), column(True, "p50"), deltas("p50"), " ms",
                     "<= +0.3 ms", signed=True))  # fmt: skip
    rows.append(_row("latency p99 (ms)", column(False, "p99"), column(True, "p99"), deltas("p99"), " ms",
                     "<= +2 ms", signed=True))  # fmt: skip
    bench.print_table(
        ["figure", "baseline mitmdump", "mitmdump + addon", "addon vs baseline", "target"], rows
    )
    return 0


def _row(
    name: str,
    baseline: list[float],
    addon: list[float],
    compared: list[float],
    suffix: str,
    target: str,
    *,
    unit: str = "",
    signed: bool = False,
) -> list[Any]:
    middle = bench.median(compared)
    shown = f"{middle:+.2f}{suffix}" if signed else f"{middle:.3f}{suffix}"
    return [
        name,
        f"{bench.median(baseline):.1f}{unit}",
        f"{bench.median(addon):.1f}{unit}",
        f"{shown} [{bench.spread(compared)}]",
        target,
    ]


if __name__ == "__main__":
    sys.exit(main())
