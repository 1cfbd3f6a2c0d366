#!/usr/bin/env python
"""What watching a run costs: `webarena-live serve` with the live dashboard open, the same serve
unwatched, and plain `mitmdump -q`, all three loaded in the same seconds.

Two identical `serve` processes (same site map, output directory and task)
and the baseline run side by side on the same CPU, loaded at the same time as
in `bench_proxy.py`; headless Chromium keeps the dashboard open on one
`serve` (its session's event stream, the global stream, its progress and
session list refreshes), so that proxy also streams every event to the page.
Watched vs unwatched is the dashboard's cost alone; each against the
baseline is the proxy table's figure with and without a dashboard, taken in
the same seconds, so the hour's noise cancels out of the comparison.

    .venv/bin/python scripts/bench_dashboard.py [--rounds N] [--seconds S] [--connections C]

Target: watched >= 0.98x unwatched (requests/s and CPU per request).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_common as bench
import bench_proxy

BASELINE, UNWATCHED, WATCHED = "baseline", "unwatched", "watched"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=8, help="rounds (default 8)")
    parser.add_argument("--seconds", type=float, default=4.0, help="seconds of load per round (default 4)")
    parser.add_argument("--connections", type=int, default=32, help="keep-alive clients per proxy")
    args = parser.parse_args()

    print(bench.machine_line())
    with bench.upstream(size=512) as upstream_port, tempfile.TemporaryDirectory() as work:
        origin = f"http://127.0.0.1:{upstream_port}"
        url = f"{origin}/api/items?page=1"
        options = bench.harness_options(origin, Path(work))
        proxies = {name: bench.Proxy(serve=True, serve_options=options) for name in (UNWATCHED, WATCHED)}
        proxies[BASELINE] = bench.Proxy(serve=False)
        rows: list[dict[str, dict[str, float]]] = []
        with (
            proxies[BASELINE],
            proxies[UNWATCHED],
            proxies[WATCHED],
            bench_proxy.watching(proxies[WATCHED].control_port, True) as open_page,
        ):
            for name in (UNWATCHED, WATCHED):
                session = {"task_id": bench_proxy.TASK_ID, "session": bench_proxy.SESSION}
                bench.control(proxies[name].control_port, "POST", "/sessions", session)
            open_page()
            for proxy in proxies.values():  # imports and first connections before anything counts
                bench.run_load(proxy.port, url, connections=4, seconds=1.0, session=bench_proxy.SESSION)
            for index in range(args.rounds):
                figures = bench_proxy.measure(
                    proxies, url, connections=args.connections, seconds=args.seconds
                )
                rows.append(figures)
                print(f"  round {index + 1}: " + ", ".join(f"{name} {figures[name]['rps']:.1f} req/s"
                                                       for name in proxies), flush=True)  # fmt: skip

    def ratio(of: str, to: str, key: str) -> str:
        values = [row[of][key] / row[to][key] for row in rows]
        if key == "cpu_us":
            values = [1 / value for value in values]
        return f"{bench.median(values):.3f}x [{bench.spread(values)}]"

    def delta(of: str, to: str, key: str) -> str:
        values = [row[of][key] - row[to][key] for row in rows]
        return f"{bench.median(values):+.2f} ms [{bench.spread(values)}]"

    print(f"\n{args.rounds} rounds of {args.seconds:g} s, {args.connections} connections per proxy, all "
          "three loaded together; medians, per-round min..max in brackets\n")  # fmt: skip
    pairs = [(UNWATCHED, BASELINE), (WATCHED, BASELINE), (WATCHED, UNWATCHED)]
    bench.print_table(
        ["figure", *[f"{of} vs {to}" for of, to in pairs], "target (watched vs unwatched)"],
        [
            ["throughput (req/s)", *[ratio(*pair, "rps") for pair in pairs], ">= 0.98x"],
            ["throughput from CPU/req", *[ratio(*pair, "cpu_us") for pair in pairs], ">= 0.98x"],
            ["latency p50", *[delta(*pair, "p50") for pair in pairs], ""],
            ["latency p99", *[delta(*pair, "p99") for pair in pairs], ""],
        ],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
