#!/usr/bin/env python
"""The control process under `serve --workers 2 --ray`, measured: what one session costs the front.

What users run: `webarena-live serve --workers 2` (local workers) and `webarena-live serve --workers 2
--ray ADDRESS` on a two-node Ray cluster started here (`ray.cluster_utils.Cluster`, every node on
127.0.0.1), taking turns round by round. Each round runs whole sessions from 8 threads: `POST /sessions`,
three navigations through the session's own address (small pages of a local upstream), the finish,
with `--output-dir` set (with Ray the finished session's three files are carried to the front through
Ray). Per set-up: sessions/s, and the front process's CPU time per session (from /proc): the cost that
bounds how many sessions per second one control process can take, whatever the number of workers.

    .venv/bin/python scripts/bench_ray.py [--rounds N] [--sessions S] [--quick]

No target: the figures feed the capacity model in docs/notes/scale.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_common as bench

os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"

NAVIGATION = {"Accept": "text/html", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}
ANSWER = {"task_type": "NAVIGATE", "status": "SUCCESS", "retrieved_data": None}
TASK_ID = 1003


def one_session(control: str, name: str, url: str) -> None:
    body = {"task_id": TASK_ID, "session": name, "restart": True}
    started = requests.post(f"{control}/sessions", json=body, timeout=60).json()
    for step in range(3):
        requests.get(f"{url}?step={step}", proxies={"http": started["proxy"]}, headers=NAVIGATION, timeout=30)
    reply = requests.post(f"{control}/sessions/{name}/finish", json=ANSWER, timeout=60)
    assert reply.status_code == 200, reply.text


def run_round(control: str, front_pid: int, url: str, sessions: int, tag: str) -> dict[str, float]:
    cpu_before, began = bench.cpu_seconds(front_pid), time.monotonic()
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda i: one_session(control, f"{tag}-{i}", url), range(sessions)))
    took, cpu = time.monotonic() - began, bench.cpu_seconds(front_pid) - cpu_before
    return {"sessions_per_s": sessions / took, "front_cpu_ms": 1000 * cpu / sessions}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sessions", type=int, default=64)
    parser.add_argument("--quick", action="store_true", help="one round of 16 sessions: checks that it runs")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.sessions = 1, 16
    from ray.cluster_utils import Cluster

    from webarena_live.launch import ServeProcess

    print(bench.machine_line())
    node = {"node_ip_address": "127.0.0.1", "num_cpus": 1}
    cluster = Cluster(initialize_head=True, head_node_args={**node, "include_dashboard": False})
    cluster.add_node(**node)
    cluster.wait_for_nodes()
    results: dict[str, list[dict[str, float]]] = {"local": [], "ray": []}
    with bench.upstream() as port, tempfile.TemporaryDirectory() as work:
        url = f"http://127.0.0.1:{port}/"
        config = Path(work) / "config.json"
        config.write_text(json.dumps({"environments": {"__SHOPPING__": {"urls": [url.rstrip("/")]}}}))
        setups: dict[str, Any] = {}
        for kind, extra in (("local", []), ("ray", ["--ray", cluster.address])):
            flags = ["--config", str(config), "--quiet", "--output-dir", str(Path(work) / kind)]
            served = ServeProcess("--workers", "2", *extra, *flags, "--set", f"confdir={work}/conf")
            setups[kind] = served.start(timeout=180)
        try:
            for round_ in range(args.rounds):
                for kind, served in setups.items():
                    found = run_round(served.control_url, served.pid, url, args.sessions, f"{kind}{round_}")
                    results[kind].append(found)
                    print(f"round {round_ + 1} {kind}: {found['sessions_per_s']:.1f} sessions/s, "
                          f"front {found['front_cpu_ms']:.1f} ms CPU per session", flush=True)  # fmt: skip
            for kind in setups:  # every finished session's files, carried or written, each kept
                kept = len(list((Path(work) / kind).rglob("eval_result.json")))
                print(
                    f"{kind}: {kept} of {args.rounds * args.sessions} sessions' files in the output directory"
                )
        finally:
            for served in setups.values():
                served.stop()
            cluster.shutdown()
    rows = []
    for kind, found in results.items():
        rate = [r["sessions_per_s"] for r in found]
        cpu = [r["front_cpu_ms"] for r in found]
        rows.append(
            [
                kind,
                f"{bench.median(rate):.1f} ({bench.spread(rate)})",
                f"{bench.median(cpu):.1f} ({bench.spread(cpu)})",
            ]
        )
    bench.print_table(["workers", "sessions/s", "front CPU ms/session"], rows)
    ratio = bench.median([r["front_cpu_ms"] for r in results["ray"]]) / bench.median(
        [r["front_cpu_ms"] for r in results["local"]]
    )
    print(f"front CPU per session, ray / local: {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
