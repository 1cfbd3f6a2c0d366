#!/usr/bin/env python
"""What a reward adds to a bare finish, per adapter, and the first reward of a fresh process.

A real `webarena-live serve` (with `--output-dir`, as a training harness runs it) in front of the demo
shop; sessions of 1,000 events (navigations through each session's own proxy address), ending on the
product page (a success) or one page short (a failure, which the reward also checks for a site that
never answered). Each session is then judged once, by one of:

- `finish`: the baseline, a bare `POST /sessions/{s}/finish` on a kept-open httpx client;
- `score`, `ascore`: `webarena_live.rewards`;
- `verl`: `compute_score` called as verl calls it;
- `nemo-gym`: `verify_body`, what the resources server's `/verify` runs;
- `harbor`: `verify`, which also writes the reward files;
- `openenv`: `WebArenaEnvironment.step_async`, and `verifiers`: `WebArenaRubric.score_rollout`, when
  this interpreter has them (run the script with `.venv-openenv/bin/python` or
  `.venv-verifiers/bin/python` for those rows).

Sessions are judged in interleaved rounds, so every adapter meets the same machine load; the table
gives the median time per kind and its difference from the baseline's (target: under 5 ms at 1,000
events). Then a fresh interpreter imports `webarena_live.rewards` and scores one session, then a
second one: its first reward against its warm one (target: within 2x).

    .venv/bin/python scripts/bench_rewards.py [--events 1000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_common as bench

from webarena_live.demo import site as demo_site
from webarena_live.launch import ServeProcess

NAVIGATION = {"Accept": "text/html", "Sec-Fetch-Dest": "document", "Sec-Fetch-Mode": "navigate"}
NAVIGATED = {"task_type": "NAVIGATE", "status": "SUCCESS", "retrieved_data": None}
PRODUCT = "/enamel-camp-mug.html"

FRESH = r"""
import json, sys, time
started = time.perf_counter()
from webarena_live.rewards import score
imported = time.perf_counter()
first = score(sys.argv[2], json.loads(sys.argv[4]), control=sys.argv[1])
done = time.perf_counter()
second = score(sys.argv[3], json.loads(sys.argv[4]), control=sys.argv[1])
warm = time.perf_counter() - done
print(json.dumps({"import": imported - started, "first": done - imported, "warm": warm,
                  "values": [first.value, second.value]}))
"""


def session(control: httpx.Client, shop: str, name: str, events: int, *, success: bool) -> None:
    """`events` navigations through the session's own address (eight at a time), then the product page
    last (or just before the last)."""
    started = control.post("/sessions", json={"task_id": 1003, "session": name, "run": name}).json()
    local = threading.local()

    def get(path: str) -> None:
        if not hasattr(local, "browser"):
            local.browser = requests.Session()
            local.browser.proxies = {"http": started["proxy"]}
        local.browser.get(f"{shop}{path}", headers=NAVIGATION, timeout=30).raise_for_status()

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(get, [f"/?n={i}" for i in range(events - 2)]))
    for path in [f"/?n={events}", PRODUCT] if success else [PRODUCT, "/"]:
        get(path)


def adapters(control_url: str, http: httpx.Client, work: Path) -> dict[str, Callable[[str], float]]:
    """Each way to judge a session: the seconds it took and a check of its value."""
    from webarena_live.rewards import ascore, score
    from webarena_live.rewards.harbor import verify
    from webarena_live.rewards.nemogym import verify_body
    from webarena_live.rewards.verl import compute_score

    def timed(call: Callable[[], Any]) -> float:
        started = time.perf_counter()
        call()
        return time.perf_counter() - started

    loop = asyncio.new_event_loop()
    gym_body = {
        "responses_create_params": {"input": []},
        "response": {
            "output": [
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": json.dumps(NAVIGATED)}],
                }
            ]
        },
    }
    kinds: dict[str, Callable[[str], float]] = {
        "finish": lambda s: timed(
            lambda: http.post(f"/sessions/{s}/finish", json=NAVIGATED).raise_for_status()
        ),
        "score": lambda s: timed(lambda: score(s, NAVIGATED, control=control_url)),
        "ascore": lambda s: timed(lambda: loop.run_until_complete(ascore(s, NAVIGATED, control=control_url))),
        "verl": lambda s: timed(
            lambda: compute_score(
                data_source="webarena",
                solution_str=json.dumps(NAVIGATED),
                ground_truth=None,
                extra_info={"webarena_session": s},
                control=control_url,
            )
        ),
        "nemo-gym": lambda s: timed(
            lambda: loop.run_until_complete(
                verify_body({**gym_body, "webarena_session": s}, control=control_url)
            )
        ),
        "harbor": lambda s: timed(lambda: _harbor(verify, s, control_url, work)),
    }
    if importlib.util.find_spec("openenv") is not None:
        kinds["openenv"] = lambda s: timed(lambda: loop.run_until_complete(_openenv_step(s, control_url)))
    if importlib.util.find_spec("verifiers") is not None:
        kinds["verifiers"] = lambda s: timed(
            lambda: loop.run_until_complete(_verifiers_rollout(s, control_url))
        )
    return kinds


def _harbor(verify: Any, name: str, control_url: str, work: Path) -> None:
    answer = work / "answer.json"
    answer.write_text(json.dumps(NAVIGATED))
    status, line = verify(name, answer, control=control_url, token=None, out=work / "verifier" / name)
    assert status == 0, line


async def _openenv_step(name: str, control_url: str) -> None:
    from webarena_live.rewards.openenv_env import WebArenaAction, WebArenaEnvironment

    env = WebArenaEnvironment(control_url)
    env._state.session, env._state.task_id = name, 1003  # the episode reset started, as the server keeps it
    await env.step_async(WebArenaAction(answer=NAVIGATED))


async def _verifiers_rollout(name: str, control_url: str) -> None:
    from verifiers.types import State

    from webarena_live.rewards.verifiers_rubric import WebArenaRubric

    state = State(input={"prompt": [], "example_id": 0, "answer": "", "info": {"webarena_session": name}})
    state["completion"], state["trajectory"] = [{"role": "assistant", "content": json.dumps(NAVIGATED)}], []
    await WebArenaRubric(control=control_url).score_rollout(state)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=1000, help="events per session (default 1000)")
    parser.add_argument("--rounds", type=int, default=3, help="sessions per adapter and verdict (default 3)")
    parser.add_argument(
        "--adapters", help="comma-separated adapters to time beside the finish (default: all here)"
    )
    parser.add_argument("--no-fresh", action="store_true", help="skip the fresh-process measurement")
    args = parser.parse_args()
    print(bench.machine_line())
    work = Path(tempfile.mkdtemp(prefix="bench-rewards-"))
    shop = demo_site.serve("127.0.0.1", 0)
    (work / "config.json").write_text(json.dumps({"environments": {"__SHOPPING__": {"urls": [shop.url]}}}))
    served = ServeProcess(
        "--config",
        str(work / "config.json"),
        "--output-dir",
        str(work / "out"),
        "--quiet",
        cwd=work,
        env={"XDG_STATE_HOME": str(work / "state")},
    ).start()
    times: dict[tuple[str, bool], list[float]] = {}
    try:
        with httpx.Client(base_url=served.control_url, timeout=120) as http:
            kinds = adapters(served.control_url, http, work)
            if args.adapters:
                chosen = {"finish", *args.adapters.split(",")}
                kinds = {kind: judge for kind, judge in kinds.items() if kind in chosen}
            for kind, judge in kinds.items():  # warm: clients made, connections open, modules loaded
                session(http, shop.url, f"warm-{kind}", 10, success=False)
                judge(f"warm-{kind}")
            for round_ in range(args.rounds):
                for success in (True, False):
                    for kind, judge in kinds.items():
                        name = f"{kind}-{round_}-{'s' if success else 'f'}"
                        session(http, shop.url, name, args.events, success=success)
                        times.setdefault((kind, success), []).append(judge(name))
                print(f"  round {round_ + 1}/{args.rounds} done", flush=True)
            rows = []
            for kind in kinds:
                row: list[Any] = [kind]
                for success in (True, False):
                    took = bench.median(times[(kind, success)]) * 1000
                    base = bench.median(times[("finish", success)]) * 1000
                    row += [f"{took:.2f}", f"{took - base:+.2f}" if kind != "finish" else "-"]
                rows.append(row)
            print(f"\nper reward, {args.events} events per session (median of {args.rounds}; ms):")
            bench.print_table(["adapter", "success", "added", "failure", "added"], rows)

            fresh = []
            for index in range(0 if args.no_fresh else args.rounds):
                names = [f"fresh-{index}-{n}" for n in (1, 2)]
                for name in names:
                    session(http, shop.url, name, args.events, success=True)
                done = subprocess.run(
                    [sys.executable, "-c", FRESH, served.control_url, *names, json.dumps(NAVIGATED)],
                    capture_output=True,
                    text=True,
                    check=True,
                    timeout=120,
                )
                fresh.append(json.loads(done.stdout))
            if not fresh:
                return 0
            first = bench.median([f["first"] for f in fresh]) * 1000
            warm = bench.median([f["warm"] for f in fresh]) * 1000
            imported = bench.median([f["import"] for f in fresh]) * 1000
            print(
                f"\nfresh process ({args.events} events): import {imported:.1f} ms, "
                f"first reward {first:.2f} ms, "
                f"warm reward {warm:.2f} ms, first/warm {first / warm:.2f}x (target <= 2x)"
            )
    finally:
        served.stop()
        shop.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
