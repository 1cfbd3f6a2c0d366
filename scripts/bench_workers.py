#!/usr/bin/env python
"""Workers and session addresses, measured: throughput of `serve --workers 2` against one process, and
Chromium page loads on a real application (DokuWiki) through a session's own address and its PAC file.

Part `throughput`:

What users run: `webarena-live serve` (one process, pinned to the first CPU as the other benchmarks pin
the proxy) and `webarena-live serve --workers 2` (the front and two workers, free to use every CPU),
each with two running sessions of a task and its traffic sent to the sessions' own proxy addresses
(`POST /sessions` answers them; no credentials). The upstream and the load generators run in their
own processes on the other CPU(s), as in `bench_proxy.py`; the two set-ups take turns round by
round, so drift on a shared machine falls on both. Per run: requests/s, and the proxy processes'
CPU time per request (front and workers summed, from /proc).

Part `pages` (DokuWiki from Debian's package, as the test suite runs it; Chromium and the wiki on
the other CPU(s), the proxies on the first): a fresh headless Chromium per round loads the same six
wiki pages (the last one again, from its cache), through

- plain `mitmdump` (the baseline) and a `serve` session's own address, both a bare `--proxy-server`:
  time per page load and requests that reached the network (the cache stays on: equal counts);
- the session's PAC file and its bare address: the proxy's CPU time per page load (with PAC the
  static assets go straight to the wiki, reached as `wiki.test` since Chromium sends `127.0.0.1`
  sites around any PAC script).

    .venv/bin/python scripts/bench_workers.py [--part throughput|pages|all] [--rounds N] [--seconds S]
                                              [--connections C]

Targets on a 2-core machine: 2 workers >= 1.5x one process; a page load through a session's address
<= 1.05x plain mitmdump, with the same requests; with PAC, the proxy's CPU per page load <= 0.4x.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_common as bench

TASK_ID = 1005
SESSIONS = ("bench-a", "bench-b")


def _pids(proxy: bench.Proxy) -> list[int]:
    health = bench.control(proxy.control_port, "GET", "/health")
    return [proxy.pid, *(worker["pid"] for worker in health.get("workers", []))]


def run_once(proxy: bench.Proxy, url: str, *, connections: int, seconds: float) -> dict[str, float]:
    """Load through both sessions' addresses at once; requests/s and CPU us per request."""
    ports = []
    for name in SESSIONS:
        started = bench.control(proxy.control_port, "POST", "/sessions",
                                {"task_id": TASK_ID, "session": name, "restart": True})  # fmt: skip
        ports.append(int(started["proxy"].rsplit(":", 1)[1]))
    pids = _pids(proxy)
    cpu_before = sum(bench.cpu_seconds(pid) for pid in pids)
    loads = [bench.start_load(port, url, connections=connections // 2, seconds=seconds) for port in ports]
    results = [bench.load_result(load, timeout=seconds + 120) for load in loads]
    cpu = sum(bench.cpu_seconds(pid) for pid in pids) - cpu_before
    requests = sum(result["requests"] for result in results)
    return {"rps": sum(result["rps"] for result in results), "cpu_us": cpu / requests * 1e6}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["throughput", "pages", "all"], default="all")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--connections", type=int, default=16)
    args = parser.parse_args()
    print(bench.machine_line())
    if args.part in ("throughput", "all"):
        throughput(args)
    if args.part in ("pages", "all"):
        from bench_pages import pages

        pages(rounds=args.rounds)
    return 0


def throughput(args: argparse.Namespace) -> None:
    work = Path(tempfile.mkdtemp(prefix="bench-workers-"))
    figures: dict[str, list[dict[str, float]]] = {"1 process": [], "2 workers": []}
    with bench.upstream() as port:
        url = f"http://127.0.0.1:{port}/"
        options = bench.harness_options(f"http://127.0.0.1:{port}", work)
        set_ups: dict[str, Any] = {
            "1 process": bench.Proxy(serve=True, serve_options=options),
            "2 workers": bench.Proxy(
                serve=True, serve_options=options, serve_args=["--workers", "2"], cpus=bench.CPUS
            ),
        }
        for index in range(args.rounds):
            for name, proxy in set_ups.items():
                with proxy:
                    run_once(proxy, url, connections=4, seconds=1.0)  # warm up: imports, first connections
                    result = run_once(proxy, url, connections=args.connections, seconds=args.seconds)
                figures[name].append(result)
                print(f"  round {index + 1} {name:9}: {result['rps']:8.1f} req/s, "
                      f"{result['cpu_us']:6.0f} us CPU/req", flush=True)  # fmt: skip
    one = bench.median([f["rps"] for f in figures["1 process"]])
    two = bench.median([f["rps"] for f in figures["2 workers"]])
    rows = [
        [name, f"{bench.median([f['rps'] for f in runs]):.0f}", bench.spread([f["rps"] for f in runs]),
         f"{bench.median([f['cpu_us'] for f in runs]):.0f}"]
        for name, runs in figures.items()
    ]  # fmt: skip
    bench.print_table(["set-up", "req/s (median)", "spread", "CPU us/req"], rows)
    print(f"2 workers / 1 process: {two / one:.2f}x (target >= 1.5x)")


if __name__ == "__main__":
    sys.exit(main())
