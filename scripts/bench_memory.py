#!/usr/bin/env python
"""Proxy memory over a long session: RSS growth per 10,000 captured events.

For each scenario a fresh `mitmdump` with the webarena-live addon runs one
session of a task (every flow is captured into its trace and kept until the
finish), next to a fresh plain `mitmdump` as the reference for what
mitmproxy itself does with the same traffic. After start-up and a short
warm-up, the RSS is read from /proc; then N requests go through the proxy
and the RSS is read again. Growth is scaled to 10,000 events.

Scenarios: small JSON responses (512 bytes); 1 MB JSON responses (too large
for an event to keep, like any body over the cap); and 1 MB responses with
mitmproxy's `stream_large_bodies=64k` (streamed through, never buffered).

    .venv/bin/python scripts/bench_memory.py [--quick] [--events N] [--large-events N]

Target: <= 20 MB per 10,000 events, and not growing with body size.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_common as bench

SESSION = "bench"
TASK_ID = 1005
MEGABYTE = 1024 * 1024


CONNECTIONS = 8


def grow(proxy: bench.Proxy, url: str, *, events: int, headers: list[str]) -> tuple[int, int, int, int]:
    """(RSS after start-up, after the warm-up, after `events` more requests; events captured)."""
    if proxy.addon:
        bench.control(proxy.control_port, "POST", "/sessions", {"task_id": TASK_ID, "session": SESSION})
    started = proxy.rss()
    # Warm-up, same traffic: first connections, lazily imported code, and the high-water mark of
    # the buffers `CONNECTIONS` bodies in flight need (a step, paid once, with or without the addon).
    warm_up = max(50, events // 10)
    bench.run_load(proxy.port, url, connections=CONNECTIONS, seconds=3600, session=SESSION, limit=warm_up,
                   headers=headers)  # fmt: skip
    time.sleep(0.5)
    before = proxy.rss()
    bench.run_load(proxy.port, url, connections=CONNECTIONS, seconds=3600, session=SESSION, limit=events,
                   headers=headers)  # fmt: skip
    time.sleep(0.5)  # let the last flows finish and the evaluation warm-up run
    after = proxy.rss()
    captured = events
    if proxy.addon:
        total = bench.control(proxy.control_port, "GET", f"/sessions/{SESSION}")["counts"]["total"]
        captured = total - warm_up
    return started, before, after, captured


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="1,500 small, 120 large responses (< 1 min)")
    parser.add_argument("--events", type=int, help="requests with small responses (default 10,000)")
    parser.add_argument("--large-events", type=int, help="requests with 1 MB responses (default 1,000)")
    args = parser.parse_args()
    small = args.events or (1_500 if args.quick else 10_000)
    large = args.large_events or (120 if args.quick else 1_000)
    scenarios = [
        ("small responses (512 B)", small, [], []),
        ("1 MB responses", large, [f"X-Bench-Size: {MEGABYTE}"], []),
        ("1 MB, stream_large_bodies=64k", large, [f"X-Bench-Size: {MEGABYTE}"], ["stream_large_bodies=64k"]),
    ]

    print(bench.machine_line())
    rows = []
    with bench.upstream(size=512) as upstream_port:
        url = f"http://127.0.0.1:{upstream_port}/api/items?page=1"
        for name, events, headers, options in scenarios:
            figures = {}
            for with_addon in (False, True):
                with bench.Proxy(addon=with_addon, options=options) as proxy:
                    figures[with_addon] = grow(proxy, url, events=events, headers=headers)
            _, base_before, base_after, base_events = figures[False]
            started, before, after, captured = figures[True]
            per_10k = (after - before) / max(captured, 1) * 10_000 / MEGABYTE
            base_per_10k = (base_after - base_before) / max(base_events, 1) * 10_000 / MEGABYTE
            print(f"  {name}: {captured:,} events, RSS {started / MEGABYTE:.1f} (start-up) -> "
                  f"{before / MEGABYTE:.1f} (warm) -> {after / MEGABYTE:.1f} MB; plain mitmdump "
                  f"{base_before / MEGABYTE:.1f} -> {base_after / MEGABYTE:.1f} MB", flush=True)  # fmt: skip
            rows.append([
                name,
                f"{captured:,}",
                f"{started / MEGABYTE:.1f} / {before / MEGABYTE:.1f}",
                f"{after / MEGABYTE:.1f}",
                f"{per_10k:+.1f}",
                f"{base_per_10k:+.1f}",
                "<= 20 MB, flat in body size",
            ])  # fmt: skip
    print()
    bench.print_table(
        ["scenario", "events", "RSS start-up / warm MB", "RSS after MB", "growth MB / 10k events",
         "plain mitmdump MB / 10k requests", "target"],
        rows,
    )  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
