#!/usr/bin/env python
"""Time from the agent's final response to the verdict, live vs the HAR workflow of the reference.

A real `webarena-live serve` (official dataset, `--output-dir` set, as a
benchmark harness runs it) captures sessions of 100, 1,000 and
10,000 events: browsing noise (pages, assets, XHRs, form posts) replayed
through the proxy against a local upstream, then the golden requests of an
official task. Each session is then finished with `POST /sessions/{s}/finish`
on the control port; the figure is that round trip, measured by the client —
what the agent waits for.

The baseline is what a user of the HAR workflow pays for the same session
after the run: the reference `webarena-verified==1.2.3` writes the session's
HAR (the very `network.har` the proxy wrote), loads it and evaluates the task.
It is timed inside the reference's own process (start-up and dataset loading
excluded), so the comparison is as kind to the baseline as it can be.

    .venv/bin/python scripts/bench_finish.py [--quick] [--rounds N] [--task 506]

Targets: <= 5 ms at 10,000 events; >= 20x faster than the baseline at 1,000
events; close to flat as the session grows.
"""

from __future__ import annotations

import argparse
import http.client
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # scripts.support.conformance

import bench_common as bench

from scripts.support.conformance import golden as g
from scripts.support.conformance import har_entries as har
from scripts.support.conformance.oracle_env import default_oracle_python, official_dataset

ORACLE_TIMER = r"""
import json, sys, time
from pathlib import Path
from webarena_verified.api import WebArenaVerified

spec = json.loads(Path(sys.argv[1]).read_text())
verified = WebArenaVerified(config=Path(spec["config"]))
results = {}
for case in spec["cases"]:
    document = json.loads(Path(case["har"]).read_text())
    target = Path(case["har"]).with_name("oracle-network.har")
    times, verdict = [], None
    for _ in range(spec["rounds"]):
        started = time.perf_counter()
        with target.open("w") as file:  # what a HAR recorder writes at the end of the run
            json.dump(document, file)
        result = verified.evaluate_task(
            task_id=spec["task_id"], agent_response=Path(case["response"]), network_trace=target
        )
        times.append(time.perf_counter() - started)
        verdict = [str(result.status.value), result.score]
    results[str(case["events"])] = {"seconds": times, "verdict": verdict}
print(json.dumps(results))
"""


def session_entries(task: dict[str, Any], events: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(noise, golden): `events` requests in all, the task's golden requests last."""
    golden = g.build_entries(task, g.targets_for(task))
    for entry in golden:
        if entry["request"]["url"].count("/") == 2:  # a bare origin: request its root
            entry["request"]["url"] += "/"
    base = g.SITE_URLS[task["sites"][0]]
    return har.browsing_noise(base, max(0, events - len(golden))), golden


def round_trip(port: int, method: str, path: str, body: bytes = b"") -> tuple[float, bytes, dict[str, str]]:
    """One control request on an already open connection: (seconds, body, headers), as the client sees it."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    connection.connect()
    try:
        started = time.perf_counter()
        connection.request(method, path, body=body or None, headers={"Content-Type": "application/json"})
        answer = connection.getresponse()
        data = answer.read()
        elapsed = time.perf_counter() - started
    finally:
        connection.close()
    if answer.status != 200:
        raise RuntimeError(f"{method} {path}: {answer.status} {data[:300]!r}")
    return elapsed, data, {name.lower(): value for name, value in answer.getheaders()}


def server_timing(header: str) -> dict[str, float]:
    """`evaluate;dur=0.6, total;dur=1.2` -> {"evaluate": 0.6, "total": 1.2} (milliseconds)."""
    found = {}
    for metric in header.split(","):
        name, _, rest = metric.strip().partition(";")
        if rest.startswith("dur="):
            found[name] = float(rest[4:])
    return found


def floor(port: int, count: int = 15) -> float:
    """Median round trip of the cheapest control request: what any answer costs on this machine now."""
    return bench.median([round_trip(port, "GET", "/health")[0] for _ in range(count)])


def asked_cell(timings: list[tuple[float, float | None]]) -> str:
    """`round trip [min..max] / in proxy` medians (ms) of one kind of request."""
    trips = [t for t, _ in timings]
    inside = [t for _, t in timings if t is not None]
    in_proxy = f"{bench.median(inside):.3f}" if inside else "-"
    return f"{bench.median(trips):.2f} [{bench.spread(trips)}] / {in_proxy}"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="sessions of 100 and 1,000 events, 2 rounds")
    parser.add_argument("--rounds", type=int, help="sessions finished per size (default 3; quick: 2)")
    parser.add_argument("--sizes", help="comma-separated session sizes (default 100,1000,10000)")
    parser.add_argument(
        "--task", type=int, default=506, help="official task whose golden requests end each session"
    )
    parser.add_argument("--no-outputs", action="store_true",
                        help="run the proxy without --output-dir: the finish only evaluates")  # fmt: skip
    parser.add_argument(
        "--oracle", type=Path, default=default_oracle_python(), help="python of the reference's venv"
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else ([100, 1000] if args.quick else
                                                                         [100, 1000, 10_000])  # fmt: skip
    rounds = args.rounds or (2 if args.quick else 3)

    dataset = official_dataset(args.oracle)
    task = next(t for t in json.loads(dataset.read_text()) if t["task_id"] == args.task)
    response = g.golden_response(task)
    print(bench.machine_line())
    work = Path(tempfile.mkdtemp(prefix="bench-finish-"))
    ours: dict[int, list[float]] = {}
    inside: dict[int, list[dict[str, float]]] = {}
    floors: dict[int, list[float]] = {}
    verdicts: dict[int, Any] = {}
    asked: dict[tuple[str, int], list[tuple[float, float | None]]] = {}
    cases = []
    try:
        with bench.upstream() as upstream_port:
            base = f"http://127.0.0.1:{upstream_port}"
            for site in g.SITE_URLS:
                g.SITE_URLS[site] = base
            config = work / "config.json"
            config.write_text(json.dumps(g.site_config()))
            out = work / "out"
            options = [f"webarena_tasks={dataset}", f"webarena_config={config}"]
            if not args.no_outputs:
                options.append(f"webarena_output_dir={out}")
            with bench.Proxy(serve=True, serve_options=options) as proxy:
                for events in sizes:
                    noise_entries, golden = session_entries(task, events)
                    for index in range(rounds):
                        session = f"s{events}-{index}"
                        bench.control(proxy.control_port, "POST", "/sessions",
                                      {"task_id": args.task, "session": session})  # fmt: skip
                        bench.run_replay(proxy.port, [(noise_entries, 16), (golden, 1)], session=session)
                        described = bench.control(proxy.control_port, "GET", f"/sessions/{session}")
                        captured = described["counts"]["total"]
                        floors.setdefault(events, []).append(floor(proxy.control_port))
                        # What an agent asks before finishing: progress, then a preview of the same answer.
                        for name, method, call in (
                            ("progress", "GET", "progress"),
                            ("preview", "POST", "preview"),
                        ):
                            body = json.dumps(response).encode() if method == "POST" else b""
                            took, _, answered = round_trip(
                                proxy.control_port, method, f"/sessions/{session}/{call}", body
                            )
                            asked.setdefault((name, events), []).append(
                                (took * 1000, server_timing(answered.get("server-timing", "")).get("total"))
                            )
                        path = f"/sessions/{session}/finish"
                        elapsed, data, headers = round_trip(
                            proxy.control_port, "POST", path, json.dumps(response).encode()
                        )
                        result = json.loads(data)
                        inside.setdefault(events, []).append(server_timing(headers.get("server-timing", "")))
                        ours.setdefault(events, []).append(elapsed)
                        verdicts[events] = (result["status"], result["score"], captured)
                        print(f"  {events:>6} events (captured {captured}): finish {elapsed * 1000:8.2f} ms, "
                              f"{result['status']}", flush=True)  # fmt: skip
                    case_dir = work / f"har-{events}"
                    case_dir.mkdir()
                    if args.no_outputs:  # the same files, from the control API
                        har = bench.control(proxy.control_port, "GET", f"/sessions/{session}/har")
                        (case_dir / "network.har").write_text(json.dumps(har))
                        (case_dir / "agent_response.json").write_text(json.dumps(response))
                    else:
                        task_out = out / str(args.task)
                        shutil.copy(task_out / "network.har", case_dir / "network.har")
                        shutil.copy(task_out / "agent_response.json", case_dir / "agent_response.json")
                    cases.append({"events": events, "har": str(case_dir / "network.har"),
                                  "response": str(case_dir / "agent_response.json")})  # fmt: skip
        spec = work / "oracle.json"
        spec.write_text(json.dumps({"config": str(config), "task_id": args.task, "rounds": rounds,
                                    "cases": cases}))  # fmt: skip
        done = subprocess.run([str(args.oracle), "-c", ORACLE_TIMER, str(spec)], capture_output=True,
                              text=True, check=True, timeout=3600)  # fmt: skip
        oracle = json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(f"\ntask {args.task}; {rounds} rounds per size; medians, min..max in brackets\n")
    rows = []
    for events in sizes:
        live = [t * 1000 for t in ours[events]]
        evaluate = [t.get("evaluate", float("nan")) for t in inside[events]]
        total = [t.get("total", float("nan")) for t in inside[events]]
        health = [t * 1000 for t in floors[events]]
        reference = [t * 1000 for t in oracle[str(events)]["seconds"]]
        status, score, captured = verdicts[events]
        same = [status, score] == oracle[str(events)]["verdict"]
        rows.append([
            f"{events:,}",
            f"{bench.median(live):.2f} [{bench.spread(live)}]",
            f"{bench.median(evaluate):.2f} / {bench.median(total):.2f}",
            f"{bench.median(health):.2f}",
            f"{bench.median(reference):.1f} [{bench.spread(reference)}]",
            f"{bench.median(reference) / bench.median(live):.0f}x",
            f"{status} / {'same' if same else 'DIFFERENT: ' + str(oracle[str(events)]['verdict'])}",
        ])  # fmt: skip
    bench.print_table(
        ["events", "live finish ms", "in proxy: evaluate / all ms", "GET /health ms",
         "reference write+load+eval ms", "speed-up", "verdict (vs reference)"],
        rows,
    )  # fmt: skip
    print()
    bench.print_table(["events", "progress ms: round trip / in proxy", "preview ms: round trip / in proxy",
                       "finish ms: round trip / in proxy"], [[
        f"{events:,}",
        *(asked_cell(asked[name, events]) for name in ("progress", "preview")),
        f"{bench.median([t * 1000 for t in ours[events]]):.2f} / "
        f"{bench.median([t.get('total', float('nan')) for t in inside[events]]):.2f}",
    ] for events in sizes])  # fmt: skip
    print("\nlive finish: the POST /sessions/{s}/finish round trip the agent waits for (outputs written "
          f"before the answer{': none here, --no-outputs' if args.no_outputs else ''});\n"
          "in proxy: the Server-Timing of the finish (evaluation, and everything "
          "including the outputs);\nGET /health: the round trip of the cheapest request, the floor this "
          "machine puts under any answer right now.\nprogress / preview: GET /sessions/{s}/progress and "
          "POST /sessions/{s}/preview on the same sessions just before the finish; round trip as the "
          "client sees it,\nin proxy: their Server-Timing (the route's own work, from the session found "
          "to the answer built).")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
