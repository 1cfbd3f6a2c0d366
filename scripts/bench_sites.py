#!/usr/bin/env python
"""Container copies of a site, measured: a stream of mutating sessions over copies that take tens of
seconds to be ready, with no spare and with one.

The site is the test image's shop (scripts/build_site_images.sh) with `SITE_START_DELAY` seconds of sleep
before it listens, standing for Magento's slow start; its copies are containers made through a Podman
service of the benchmark's own (`bench_sites_engine.py`: its own socket and storage, every container in
it removed at the end). Two configurations run at the same time, each on a `webarena-live serve` of
its own with the same site map but for `spares`: `--replicas` copies and no spare, and the same with one
spare. Each has `--agents` HTTP agents (one per copy by default, so every copy is held), started
`--session-seconds / --agents` apart, running `--sessions` sessions between them one after the other:
start (`"wait"` long enough for any reset), browse the copy through the session's own address (its home
page, `/whoami`, `/orders`), place an order (`POST /order`), hold the copy for `--session-seconds`, finish.
Each changed copy is made new by recreation (its container removed, a new one run and waited for).

Printed per configuration: sessions per hour; a session's wait for a copy (from `POST /sessions` to its
answer) p50 / p99 / max; seconds per reset by recreation (`/health`'s pool counters, and the spread of
the replicas' own reset lists); the resets; and whether a changed copy was ever leased before it was new
(each session reads `/orders` before it orders and must see only `seed-order`, on a container no earlier
session ordered on). Then the ratios of one spare to none.

    .venv/bin/python scripts/bench_sites.py [--replicas 2] [--sessions 12] [--start-delay 30]
                                            [--session-seconds 75] [--agents N] [--quick]

With `--agents` copies held at a time and one spare, resets keep up while a reset takes less than
`--session-seconds / --agents` (the time between two finishes); the default think time is chosen so.
Targets: with one spare, no session waits (p99 under a second) while resets keep up; no changed copy
is ever leased before it is new, in either configuration.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests
from bench_common import machine_line, percentile, print_table
from bench_sites_engine import SHOPPING, WRITE, Engine, podman_service, write_tasks

from webarena_live.launch import ServeProcess

SEEDED = ["seed-order"]
SITE = "__SHOPPING__"
ANSWER = {"task_type": "mutate", "status": "SUCCESS", "retrieved_data": None}


@dataclass
class Session:
    name: str
    waited: float
    """Seconds from `POST /sessions` to its answer."""
    status: int
    copy_url: str = ""
    container: str = ""
    orders: list[str] = field(default_factory=list)
    stale: str | None = None
    """Why its copy was not new when leased (another session's order in it, or a container an earlier
    session ordered on); None when it was."""
    verdict: str = ""


@dataclass
class Outcome:
    spares: int
    up_seconds: float
    """From `serve`'s start until every copy was ready (made and waited for)."""
    wall: float
    """From the first session's start to the last one's finish."""
    sessions: list[Session]
    resets: int
    reset_seconds: float
    resets_failed: int
    reset_list: list[float]
    """Seconds of each reset after one of the sessions, from the replicas' own lists (the copies made at
    start are listed too, and left out here, as the counters leave them out)."""


def free_block(count: int) -> int:
    """The first of `count` consecutive loopback ports nothing listens on (the copies' host ports)."""
    for _ in range(200):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            base = probe.getsockname()[1]
        if base + count > 65535:
            continue
        taken = []
        try:
            for port in range(base, base + count):
                held = socket.socket()
                taken.append(held)
                held.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for held in taken:
                held.close()
    raise RuntimeError(f"no {count} consecutive free ports on 127.0.0.1")


def pool_site(control: str) -> dict[str, Any]:
    health = requests.get(f"{control}/health", timeout=30).json()
    site: dict[str, Any] = health["pool"]["sites"][SITE]
    return site


def wait_for(what: str, ready: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not after {timeout:.0f} s")
        time.sleep(0.5)


def settled(control: str) -> bool:
    """Every copy ready and free: none leased, none being made new."""
    return all(r["state"] == "free" for r in pool_site(control)["replicas"])


def one_session(control: str, name: str, hold: float, wait: float, ordered_on: set[str]) -> Session:
    """Started (waiting up to `wait` s for a copy), browsed, an order placed, held `hold` s, finished."""
    asked = time.perf_counter()
    started = requests.post(f"{control}/sessions", json={"task_id": WRITE, "session": name, "wait": wait},
                            timeout=wait + 60)  # fmt: skip
    session = Session(name, time.perf_counter() - asked, started.status_code)
    if started.status_code != 200:
        session.verdict = f"not started: {started.text[:200]}"
        return session
    body = started.json()
    session.copy_url, proxies = body["replicas"][SITE], {"http": body["proxy"]}
    home = requests.get(f"{session.copy_url}/", proxies=proxies, timeout=30)
    home.raise_for_status()
    who = requests.get(f"{session.copy_url}/whoami", proxies=proxies, timeout=30).json()
    session.container = who["hostname"]  # the container's short id: a new container, a new name
    session.orders = requests.get(f"{session.copy_url}/orders", proxies=proxies, timeout=30).json()["orders"]
    if session.orders != SEEDED:
        session.stale = f"it held orders {session.orders}"
    elif session.container in ordered_on:
        session.stale = f"container {session.container} had taken an earlier session's order"
    ordered_on.add(session.container)
    placed = requests.post(f"{session.copy_url}/order", data={"name": "container-order"}, proxies=proxies,
                           timeout=30)  # fmt: skip
    placed.raise_for_status()
    time.sleep(hold)
    finished = requests.post(f"{control}/sessions/{name}/finish", json=ANSWER, timeout=120)
    finished.raise_for_status()
    session.verdict = finished.json()["status"]
    return session


def run(engine: Engine, work: Path, options: argparse.Namespace, spares: int) -> Outcome:
    """One configuration on a fresh `serve`: its copies made, the sessions run, every reset waited for."""
    work.mkdir()
    copies = options.replicas + spares
    port = free_block(2 * copies)
    entry = {
        "image": SHOPPING, "env": {"SITE_START_DELAY": str(options.start_delay)},
        "replicas": options.replicas, "spares": spares, "host_port": port, "env_ctrl_host_port": port + 1,
        "port_stride": 2, "engines": [engine.url], "name": f"bench-sites-{spares}",
        "ready_timeout": options.start_delay + 300,
    }  # fmt: skip
    (work / "sites.json").write_text(json.dumps({"environments": {SITE: entry}}))
    serve = ServeProcess(
        "--tasks", str(write_tasks(work / "tasks.json")), "--config", str(work / "sites.json"),
        "--output-dir", str(work / "out"), "--quiet",
        log=work / "serve.log", env={"XDG_STATE_HOME": str(work / "state")},
    )  # fmt: skip
    began = time.perf_counter()
    serve.start(timeout=120)
    control = serve.control_url
    budget = options.start_delay + 300  # a copy made, started and waited for, with this machine's load
    try:
        wait_for(f"spares {spares}: every copy ready", lambda: settled(control), budget)
        up_seconds = time.perf_counter() - began
        names = [f"s{spares}-{n}" for n in range(options.sessions)]
        queue, lock, ordered_on = list(names), threading.Lock(), set[str]()
        agents = options.agents or options.replicas

        def agent(number: int) -> list[Session]:
            time.sleep(number * options.session_seconds / agents)  # finishes spread evenly
            done: list[Session] = []
            while True:
                with lock:
                    if not queue:
                        return done
                    name = queue.pop(0)
                done.append(one_session(control, name, options.session_seconds, budget, ordered_on))

        first = time.perf_counter()
        with ThreadPoolExecutor(agents) as pool:
            sessions = [s for batch in pool.map(agent, range(agents)) for s in batch]
        wall = time.perf_counter() - first
        wait_for(f"spares {spares}: the last resets", lambda: settled(control), budget)
        site = pool_site(control)
    finally:
        serve.stop()  # removes its copies (the site map does not keep them)
    mine = set(names)
    reset_list = [
        r["seconds"] for replica in site["replicas"] for r in replica.get("resets", [])
        if r.get("after") in mine and r.get("ok")
    ]  # fmt: skip
    return Outcome(
        spares, up_seconds, wall, sorted(sessions, key=lambda s: int(s.name.rsplit("-", 1)[1])),
        site["resets"], site["reset_seconds"], site["resets_failed"], sorted(reset_list),
    )  # fmt: skip


def figures(outcome: Outcome) -> dict[str, float]:
    waits = [s.waited for s in outcome.sessions]
    ran = [s for s in outcome.sessions if s.status == 200]
    seconds = outcome.reset_list
    return {
        "sessions_per_hour": len(ran) * 3600 / outcome.wall,
        "wait_p50": percentile(waits, 0.5),
        "wait_p99": percentile(waits, 0.99),
        "wait_max": max(waits, default=float("nan")),
        "reset_mean": outcome.reset_seconds / outcome.resets if outcome.resets else float("nan"),
        "reset_p50": percentile(seconds, 0.5),
        "reset_min": min(seconds, default=float("nan")),
        "reset_max": max(seconds, default=float("nan")),
        "resets": outcome.resets,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", type=int, default=2, help="copies held at once (the site's replicas)")
    parser.add_argument("--sessions", type=int, help="mutating sessions per configuration (default 12)")
    parser.add_argument("--agents", type=int, help="sessions at once (default: --replicas)")
    parser.add_argument("--start-delay", type=float, help="the site's own start, s (default 30)")
    parser.add_argument("--session-seconds", type=float, help="a session's hold of its copy, s (default 75)")
    parser.add_argument("--quick", action="store_true", help="4 sessions, 10 s starts, 25 s holds: ~3 min")
    options = parser.parse_args()
    quick = {"sessions": 4, "start_delay": 10.0, "session_seconds": 25.0}
    full = {"sessions": 12, "start_delay": 30.0, "session_seconds": 75.0}
    for name, value in (quick if options.quick else full).items():
        if getattr(options, name) is None:
            setattr(options, name, value)
    agents = options.agents or options.replicas
    if options.agents is not None and options.agents > options.replicas:
        parser.error("--agents above --replicas: the extra agents would only wait for a copy")
    print(machine_line())
    print(
        f"{options.sessions} mutating sessions per configuration by {agents} agents over {options.replicas} "
        f"copies of the shop (ready {options.start_delay:g} s after its container starts), each holding "
        f"its copy {options.session_seconds:g} s; spares 0 and 1 at the same time on one Podman service; "
        f"one spare keeps up while a reset takes under {options.session_seconds / agents:.1f} s"
    )
    with podman_service() as engine, tempfile.TemporaryDirectory(prefix="bench-sites-") as work:
        with ThreadPoolExecutor(2) as both:
            runs = [both.submit(run, engine, Path(work) / f"spares-{k}", options, k) for k in (0, 1)]
            outcomes = [future.result() for future in runs]
        load = os.getloadavg()
    print(f"load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} at the end")
    rows, table = [], [figures(outcome) for outcome in outcomes]
    for outcome, got in zip(outcomes, table, strict=True):
        stale = [s for s in outcome.sessions if s.stale]
        failed = [s for s in outcome.sessions if s.verdict != "success"]
        rows.append([
            outcome.spares, f"{got['sessions_per_hour']:.0f}",
            f"{got['wait_p50']:.2f} / {got['wait_p99']:.2f} / {got['wait_max']:.2f}",
            f"{got['reset_mean']:.1f}",
            f"{got['reset_p50']:.1f} [{got['reset_min']:.1f}..{got['reset_max']:.1f}]",
            f"{outcome.resets} ({outcome.resets_failed} failed)",
            f"{len(stale)} of {len(outcome.sessions)}", f"{len(outcome.sessions) - len(failed)}",
            f"{outcome.up_seconds:.0f}", f"{outcome.wall:.0f}",
        ])  # fmt: skip
    print_table(
        ["spares", "sessions/h", "wait for a copy p50 / p99 / max, s", "s per reset (counters)",
         "s per reset p50 [min..max]", "resets by recreation", "leased before new", "verdicts success",
         "copies up, s", "wall, s"],
        rows,
    )  # fmt: skip
    none, one = table
    ratios = []
    labels = {"sessions/h": "sessions_per_hour", "wait p50": "wait_p50", "wait p99": "wait_p99",
              "wait max": "wait_max", "s per reset": "reset_mean", "resets": "resets"}  # fmt: skip
    for label, key in labels.items():
        ratios.append(f"{label} {one[key] / none[key]:.3g}x" if none[key] else f"{label} {one[key]:.3g} vs 0")
    print("spares 1 vs 0: " + ", ".join(ratios))
    for outcome in outcomes:
        for session in outcome.sessions:
            if session.stale or session.verdict != "success":
                print(f"  spares {outcome.spares}, {session.name}: {session.stale or ''} {session.verdict}")


if __name__ == "__main__":
    main()
