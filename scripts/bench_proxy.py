#!/usr/bin/env python
"""Throughput and added latency of `mitmdump` with the webarena-live addon vs the same `mitmdump` without.

Two `mitmdump` processes run side by side for the whole benchmark, pinned to
the same CPU: the baseline (plain mitmproxy) and the same command with
`-s addon/entry.py`, whose traffic lands in a running session of a task (so
every flow is captured, journaled and offered to evaluation). A local asyncio
upstream answers small responses; the load generator is a separate process
on the other CPU. Rounds alternate which proxy goes first, so drifting
machine load hits both alike. Per round:

- throughput: `--connections` keep-alive clients sending requests back to back
  for `--seconds`; requests/s, and the proxy's CPU time per request (from
  /proc: robust on a shared machine, where requests/s follows whatever else runs);
- latency: one client, one request at a time; p50 and p99 of the round trip.

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
TASK_ID = 1004
"""A demo mutate task with a network evaluator that looks at every event (no method filter)."""


def measure(proxy: bench.Proxy, url: str, *, connections: int, seconds: float) -> dict[str, float]:
    """One round on one proxy: a throughput run, then a latency run."""
    cpu_before = bench.cpu_seconds(proxy.pid)
    load = bench.run_load(proxy.port, url, connections=connections, seconds=seconds, session=SESSION)
    cpu = bench.cpu_seconds(proxy.pid) - cpu_before
    latency = bench.run_load(proxy.port, url, connections=1, seconds=seconds / 2, session=SESSION)
    return {
        "rps": load["rps"],
        "cpu_us": cpu / load["requests"] * 1e6,
        "p50": latency["p50_ms"],
        "p99": latency["p99_ms"],
        "requests": load["requests"] + latency["requests"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="2 rounds of 3 s (under a minute)")
    parser.add_argument("--rounds", type=int, help="rounds per proxy (default 6; quick: 2)")
    parser.add_argument(
        "--seconds", type=float, help="seconds of load per throughput run (default 8; quick: 3)"
    )
    parser.add_argument("--connections", type=int, default=32, help="keep-alive clients in throughput runs")
    args = parser.parse_args()
    rounds = args.rounds or (2 if args.quick else 6)
    seconds = args.seconds or (3.0 if args.quick else 8.0)

    print(bench.machine_line())
    results: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    with bench.upstream(size=512) as upstream_port:
        url = f"http://127.0.0.1:{upstream_port}/api/items?page=1"
        with bench.Proxy(addon=False) as baseline, bench.Proxy(addon=True) as live:
            bench.control(live.control_port, "POST", "/sessions", {"task_id": TASK_ID, "session": SESSION})
            proxies = {False: baseline, True: live}
            # Warm both up (imports, first connections) before anything counts.
            for proxy in proxies.values():
                bench.run_load(proxy.port, url, connections=4, seconds=1.0, session=SESSION)
            for index in range(rounds):
                order = (False, True) if index % 2 == 0 else (True, False)
                for with_addon in order:
                    figures = measure(proxies[with_addon], url, connections=args.connections, seconds=seconds)
                    results[with_addon].append(figures)
                    name = "addon   " if with_addon else "baseline"
                    print(f"  round {index + 1} {name}: {figures['rps']:8.1f} req/s, "
                          f"{figures['cpu_us']:7.0f} us CPU/req, p50 {figures['p50']:6.2f} ms, "
                          f"p99 {figures['p99']:7.2f} ms", flush=True)  # fmt: skip
            captured = bench.control(live.control_port, "GET", f"/sessions/{SESSION}")["counts"]["total"]

    print(f"\n{rounds} rounds, {seconds:g} s throughput runs with {args.connections} connections; "
          f"{captured:,} events captured by the addon; medians, per-round min..max in brackets\n")  # fmt: skip
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
