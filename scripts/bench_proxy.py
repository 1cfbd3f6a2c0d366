#!/usr/bin/env python
"""Throughput and added latency of `webarena-live serve` vs plain `mitmdump`.

Two proxies run side by side, pinned to the same CPU: the baseline, plain
`mitmdump -q` (mitmproxy's DumpMaster without any addon of ours), and
`webarena-live serve` — what users run, the same DumpMaster with the addon —
deployed as a benchmark harness runs it (a site map naming the upstream, an
output directory), its traffic landing in a running session of a task (so
every flow is captured, journaled, spooled and offered to evaluation). A
local asyncio upstream answers small responses; the load generators run in
their own processes on the other CPU. A second, shorter comparison runs
`serve --no-gc-tuning` (Python's garbage-collector defaults, see
`addon/commands/process_memory.py`): what the addon's own work costs when nothing of
it is paid back.

Both proxies are loaded *at the same time*: on a shared, noisy machine the
load drifts from second to second, and only figures taken in the same
seconds compare. Two CPU-bound processes on one CPU get equal shares, so the
ratio of their requests/s is the ratio of their per-request costs. Per round:

- throughput: `--connections` keep-alive clients per proxy, sending requests
  back to back for `--seconds`; requests/s, and each proxy's CPU time per
  request (from /proc);
- latency: one client sending one request at a time, to each proxy in turn
  (so neither waits for the other's CPU time, and both see the same
  seconds); p50 and p99 of the round trip.

The loads start one after the other, and the one started first has a small
edge: each round starts them from the next proxy on.

    .venv/bin/python scripts/bench_proxy.py [--quick] [--rounds N] [--seconds S] [--connections C]
                                               [--dashboard] [--profile] [--other COMMIT|DIR]

With `--other`, the baseline is another tree's `serve` instead of plain mitmdump (a commit, exported;
or a directory holding its package, see `bench_common.other_tree`), deployed the same way, its traffic
landing in a session of the same task: a change measured against the tree before it in the same
seconds, not in runs minutes apart (two proxies, as always: with a third on the one CPU, and three
loads on the other, the rounds spread twice as wide here).

With `--dashboard`, a headless Chromium keeps the live dashboard open on serve's session for the whole
run (serve streams every event to it), as a person watching the run would.

With `--profile`, py-spy samples serve (from outside) during the main rounds, and the addon's share
of its CPU samples is printed by hook, with the costliest functions inside (`scripts/hook_profile.py`).
The sampling takes some of serve's CPU time: compare ratios of runs without it.

Targets: throughput >= 0.96x the baseline (the goal beyond it: 0.98x); added latency p50 <= +0.3 ms,
p99 <= +2 ms.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_common as bench
from hook_profile import HookShares, Recording, hook_shares, table

SESSION = "bench"
TASK_ID = 1005
"""The demo task the session runs: a mutate task whose network evaluator looks at POST events."""

BASELINE, SERVE = "baseline", "serve"


def measure(
    proxies: dict[str, bench.Proxy], url: str, *, connections: int, seconds: float, first: int = 0
) -> dict[str, Any]:
    """One round: every proxy under the same load at the same time, then the latency run. The loads start
    from the `first` proxy on (a round's rotation: the load started first has a small edge)."""
    figures: dict[str, dict[str, float]] = {name: {} for name in proxies}
    cpu_before = {name: bench.cpu_seconds(proxy.pid) for name, proxy in proxies.items()}
    names = list(proxies)
    started = names[first % len(names) :] + names[: first % len(names)]
    loads = {}
    for name in started:
        loads[name] = bench.start_load(proxies[name].port, url, connections=connections, seconds=seconds,
                                       session=SESSION)  # fmt: skip
    for name, process in loads.items():
        result = bench.load_result(process, timeout=seconds + 120)
        cpu = bench.cpu_seconds(proxies[name].pid) - cpu_before[name]
        figures[name].update(rps=result["rps"], cpu_us=cpu / result["requests"] * 1e6)
    latency = bench.run_latency([proxy.port for proxy in proxies.values()], url, seconds=seconds / 2,
                                session=SESSION)  # fmt: skip
    for index, name in enumerate(proxies):
        figures[name].update(p50=latency["p50_ms"][index], p99=latency["p99_ms"][index])
    return figures


def compare(
    url: str,
    options: list[str],
    *,
    serve_args: Sequence[str] = (),
    task: int,
    rounds: int,
    seconds: float,
    connections: int,
    label: str,
    dashboard: bool = False,
    profile: bool = False,
    other: dict[str, str] | None = None,
    other_options: list[str] | None = None,
) -> tuple[list[list[Any]], int, HookShares | None]:
    """`rounds` rounds of plain mitmdump against `webarena-live serve` (`options` its `--set` pairs);
    with `profile`, serve's samples by hook during the rounds (`hook_profile.py`). With `other` (the
    environment of another tree, `bench_common.other_tree`), that tree's serve (`other_options`) is the
    baseline instead, its traffic landing in a session of the same task."""
    baseline = bench.Proxy(serve=False)
    if other is not None:
        baseline = bench.Proxy(serve=True, serve_options=other_options or options, serve_args=serve_args,
                               env=other)  # fmt: skip
    proxies = {
        BASELINE: baseline,
        SERVE: bench.Proxy(serve=True, serve_options=options, serve_args=serve_args),
    }
    results: dict[str, list[dict[str, float]]] = {BASELINE: [], SERVE: []}
    with proxies[BASELINE], proxies[SERVE], watching(proxies[SERVE].control_port, dashboard) as watched:
        for proxy in proxies.values():
            if proxy.serve:
                bench.control(proxy.control_port, "POST", "/sessions", {"task_id": task, "session": SESSION})
        watched()
        # Warm each up (imports, first connections) before anything counts.
        for proxy in proxies.values():
            bench.run_load(proxy.port, url, connections=4, seconds=1.0, session=SESSION)
        recording = Recording(proxies[SERVE].pid).start() if profile else None
        for index in range(rounds):
            round_figures = measure(proxies, url, connections=connections, seconds=seconds, first=index)
            for name, figures in round_figures.items():
                results[name].append(figures)
                print(f"  {label} round {index + 1} {name:8}: {figures['rps']:8.1f} req/s, "
                      f"{figures['cpu_us']:7.0f} us CPU/req, p50 {figures['p50']:6.2f} ms, "
                      f"p99 {figures['p99']:7.2f} ms", flush=True)  # fmt: skip
        shares = hook_shares(recording.stop()) if recording is not None else None
        session = bench.control(proxies[SERVE].control_port, "GET", f"/sessions/{SESSION}")
    return (
        _rows(results[BASELINE], results[SERVE], label, targets=other is None),
        session["counts"]["total"],
        shares,
    )


@contextlib.contextmanager
def watching(control_port: int, dashboard: bool) -> Iterator[Callable[[], None]]:
    """With `dashboard`, headless Chromium (on the helper CPUs) keeps the dashboard open on the session
    the load lands in, so serve also streams every event to it; yields what opens the page."""
    if not dashboard:
        yield lambda: None
        return
    from playwright.sync_api import sync_playwright

    os.sched_setaffinity(0, bench.HELPER_CPUS)  # Chromium inherits it: the proxy's CPU stays the proxy's
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium")
        page = browser.new_page()

        def open_page() -> None:
            page.goto(f"http://127.0.0.1:{control_port}/#{SESSION}")
            page.wait_for_selector("#live.on", timeout=10_000)  # the page is following the streams

        try:
            yield open_page
            shown = page.locator("#events tbody tr").count()
            print(f"  the dashboard showed {shown:,} events", flush=True)
        finally:
            browser.close()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="2 rounds of 3 s each (under a minute)")
    parser.add_argument("--rounds", type=int, help="rounds of the main comparison (default 16; quick: 2)")
    parser.add_argument(
        "--seconds", type=float, help="seconds of load per throughput run (default 5; quick: 3)"
    )
    parser.add_argument(
        "--connections", type=int, default=32, help="keep-alive clients per proxy in throughput runs"
    )
    parser.add_argument(
        "--dashboard",
        action="store_true",
        help="keep the live dashboard open (headless Chromium) on serve's session during the runs",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="sample serve with py-spy during the main rounds and print the addon's share by hook",
    )
    parser.add_argument(
        "--other",
        help="another tree's serve in the same rounds: a commit of this repository, or a directory that "
        "holds its package as webarena_live/ (bench_common.other_tree)",
    )
    parser.add_argument(
        "--task",
        type=int,
        default=TASK_ID,
        help="demo task of the captured session (1004: "
        "an evaluator without a method filter, which prepares its verdict on every event)",
    )
    args = parser.parse_args()
    rounds = args.rounds or (2 if args.quick else 16)
    seconds = args.seconds or (3.0 if args.quick else 5.0)

    print(bench.machine_line())
    with bench.upstream(size=512) as upstream_port, tempfile.TemporaryDirectory() as work:
        origin = f"http://127.0.0.1:{upstream_port}"
        url = f"{origin}/api/items?page=1"
        options = bench.harness_options(origin, Path(work))
        other, other_label, other_options = None, "", None
        if args.other is not None:  # its own output directory: the two serves share nothing on disk
            other, other_label = bench.other_tree(args.other, Path(work))
            (Path(work) / "other-output").mkdir()
            other_options = bench.harness_options(origin, Path(work) / "other-output")
        common: dict[str, Any] = {
            "task": args.task,
            "seconds": seconds,
            "connections": args.connections,
            "dashboard": args.dashboard,
            "other": other,
            "other_options": other_options,
        }
        rows, captured, shares = compare(
            url, options, rounds=rounds, label="", profile=args.profile, **common
        )
        own_rows, _, _ = compare(url, options, serve_args=["--no-gc-tuning"], rounds=max(2, rounds // 2),
                              label=" (--no-gc-tuning)", **common)  # fmt: skip

    print(
        f"\n{rounds} rounds (--no-gc-tuning: {max(2, rounds // 2)}), {seconds:g} s throughput runs with "
        f"{args.connections} connections; {captured:,} events captured by serve; medians, per-round "
        "min..max in brackets\n"
    )
    if other is not None:
        print(f"the baseline is the other tree's serve: {other_label}\n")
        headings = ["figure", "the other tree's serve", "this tree's serve", "this vs other", "target"]
    else:
        headings = ["figure", "plain mitmdump -q", "webarena-live serve", "serve vs baseline", "target"]
    bench.print_table(headings, [*rows, *[[*row[:4], "(the addon's own work)"] for row in own_rows]])
    if shares is not None:
        print(f"\nserve's CPU samples during the {rounds} main rounds (py-spy, scripts/hook_profile.py):\n")
        print(table(shares))
    return 0


def _rows(
    baseline: Sequence[dict[str, float]],
    serve: Sequence[dict[str, float]],
    label: str,
    *,
    targets: bool = True,
) -> list[list[Any]]:
    def column(figures: Sequence[dict[str, float]], key: str) -> list[float]:
        return [f[key] for f in figures]

    def paired(key: str) -> list[float]:
        return [a[key] / b[key] for a, b in zip(serve, baseline, strict=True)]

    def deltas(key: str) -> list[float]:
        return [a[key] - b[key] for a, b in zip(serve, baseline, strict=True)]

    def row(name: str, key: str, compared: list[float], suffix: str, target: str, *, unit: str = "",
            signed: bool = False) -> list[Any]:  # fmt: skip
        middle = bench.median(compared)
        shown = f"{middle:+.2f}{suffix}" if signed else f"{middle:.3f}{suffix}"
        return [
            name + label,
            f"{bench.median(column(baseline, key)):.1f}{unit}",
            f"{bench.median(column(serve, key)):.1f}{unit}",
            f"{shown} [{bench.spread(compared)}]",
            target if targets else "-",  # another tree's serve as the baseline: no target applies
        ]

    return [
        row("throughput (req/s)", "rps", paired("rps"), "x", ">= 0.96x"),
        row(
            "throughput from CPU/req",
            "cpu_us",
            [1 / r for r in paired("cpu_us")],
            "x",
            ">= 0.96x",
            unit=" us",
        ),
        row("latency p50 (ms)", "p50", deltas("p50"), " ms", "<= +0.3 ms", signed=True),
        row("latency p99 (ms)", "p99", deltas("p99"), " ms", "<= +2 ms", signed=True),
    ]


if __name__ == "__main__":
    sys.exit(main())
