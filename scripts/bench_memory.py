#!/usr/bin/env python
"""Proxy memory over a long session: RSS growth per 10,000 captured events.

For each scenario a fresh `webarena-live serve`, deployed as a benchmark
harness runs it (site map, output directory), runs one session of a task:
every flow is captured into its trace and kept until the finish, journaled
and spooled. A fresh plain `mitmdump -q` gets the same traffic, as the
reference for what mitmproxy itself does with it.

After start-up and a warm-up (first connections, lazily loaded code, the
high-water mark of the buffers the bodies in flight need), the traffic runs
in `--samples` equal steps and the RSS is read from /proc after each. The
figure is the least-squares slope of RSS over events, scaled to 10,000 events:
growth — what a long session pays — rather than the level. With 1 MB bodies
the RSS is a sawtooth (`serve` collects the garbage of dead flows once per
32 MB of bodies, see `addon/commands/process_memory.py`), so those runs are long
enough, by default, for its teeth not to tilt the slope.

Scenarios: small JSON responses (512 B, kept in the events); 1 MB JSON
responses (too large for an event to keep, like any body over the cap),
buffered by mitmproxy; and the same with `stream_large_bodies=64k` (streamed
through, never buffered).

    .venv/bin/python scripts/bench_memory.py [--quick] [--events N] [--large-events N]

Target: <= 20 MB per 10,000 events, and not growing with body size.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_common as bench

SESSION = "bench"
TASK_ID = 1005
MEGABYTE = 1024 * 1024
CONNECTIONS = 8


def slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Least-squares slope of ys over xs."""
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    spread = sum((x - mean_x) ** 2 for x in xs)
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / spread if spread else 0.0


def grow(
    proxy: bench.Proxy, url: str, *, events: int, warm_up: int, samples: int, headers: list[str]
) -> tuple[int, list[int], list[int]]:
    """(RSS after start-up, events sent so far at each sample, RSS at each sample)."""
    if proxy.serve:
        bench.control(proxy.control_port, "POST", "/sessions", {"task_id": TASK_ID, "session": SESSION})
    started = proxy.rss()
    bench.run_load(proxy.port, url, connections=CONNECTIONS, seconds=3600, session=SESSION, limit=warm_up,
                   headers=headers)  # fmt: skip
    time.sleep(0.3)
    sent, rss = [0], [proxy.rss()]
    step = max(1, events // samples)
    for _ in range(samples):
        bench.run_load(proxy.port, url, connections=CONNECTIONS, seconds=3600, session=SESSION, limit=step,
                       headers=headers)  # fmt: skip
        time.sleep(0.3)  # the last flows finish, the evaluation warm-up runs
        sent.append(sent[-1] + step)
        rss.append(proxy.rss())
    if proxy.serve:
        total = bench.control(proxy.control_port, "GET", f"/sessions/{SESSION}")["counts"]["total"]
        expected = warm_up + sent[-1]
        assert total >= expected, f"the session holds {total} events, {expected} were sent"
    return started, sent, rss


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="2,000 small, 300 large responses (< 1 min)")
    parser.add_argument("--events", type=int, help="requests with small responses (default 10,000)")
    parser.add_argument("--large-events", type=int, help="requests with 1 MB responses (default 10,000)")
    parser.add_argument("--samples", type=int, help="RSS readings per scenario (default 24; quick: 8)")
    args = parser.parse_args()
    small = args.events or (2_000 if args.quick else 10_000)
    large = args.large_events or (300 if args.quick else 10_000)
    samples = args.samples or (8 if args.quick else 24)
    big = [f"X-Bench-Size: {MEGABYTE}"]
    scenarios = [
        ("small responses (512 B)", small, max(200, small // 10), [], []),
        ("1 MB responses, buffered", large, 100, big, []),
        ("1 MB responses, stream_large_bodies=64k", large, 100, big, ["stream_large_bodies=64k"]),
    ]

    print(bench.machine_line())
    rows = []
    with bench.upstream(size=512) as upstream_port, tempfile.TemporaryDirectory() as work:
        origin = f"http://127.0.0.1:{upstream_port}"
        url = f"{origin}/api/items?page=1"
        serve_options = bench.harness_options(origin, Path(work))
        for name, events, warm_up, headers, options in scenarios:
            figures = {}
            for serve in (False, True):
                proxy = bench.Proxy(serve=serve, options=options, serve_options=serve_options)
                with proxy:
                    figures[serve] = grow(proxy, url, events=events, warm_up=warm_up,
                                               samples=samples, headers=headers)  # fmt: skip
            started, sent, rss = figures[True]
            _, base_sent, base_rss = figures[False]
            per_10k = slope(sent, rss) * 10_000 / MEGABYTE
            base_per_10k = slope(base_sent, base_rss) * 10_000 / MEGABYTE
            readings = " ".join(f"{r / MEGABYTE:.0f}" for r in rss)
            base_readings = " ".join(f"{r / MEGABYTE:.0f}" for r in base_rss)
            print(f"  {name}: {warm_up + sent[-1]:,} events; serve RSS {started / MEGABYTE:.0f} MB at "
                  f"start-up, then {readings} MB; plain mitmdump {base_readings} MB", flush=True)  # fmt: skip
            rows.append([
                name,
                f"{warm_up + sent[-1]:,}",
                f"{started / MEGABYTE:.1f}",
                f"{rss[0] / MEGABYTE:.1f} -> {rss[-1] / MEGABYTE:.1f}",
                f"{per_10k:+.1f}",
                f"{base_per_10k:+.1f}",
                "<= 20 MB, flat in body size",
            ])  # fmt: skip
    print()
    bench.print_table(
        ["scenario", "events", "RSS at start-up MB", "RSS after warm-up -> end MB",
         "growth MB / 10k events (slope)", "plain mitmdump MB / 10k requests", "target"],
        rows,
    )  # fmt: skip
    if args.quick:
        print(
            "\n--quick checks that everything runs: a few hundred events are too few for a slope (with 1 MB "
            "bodies, one collection per 32 MB is the whole run); the figures come from the full run."
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
