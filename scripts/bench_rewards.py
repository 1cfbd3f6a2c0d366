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

With `--old-python`, another tree's interpreter (the main checkout's venv: its own `webarena_live`)
scores beside this one, against the same server: a `score-old` row, and its fresh process in the
same table, so before and after are measured side by side under the same load.

    .venv/bin/python scripts/bench_rewards.py [--events 1000] [--rounds 3] [--old-python PATH]
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

OLD_SCORER = r"""
import json, sys, time
from webarena_live.rewards import score
for line in sys.stdin:
    name = line.strip()
    started = time.perf_counter()
    reward = score(name, json.loads(sys.argv[2]), control=sys.argv[1])
    print(json.dumps({"took": time.perf_counter() - started, "value": reward.value}), flush=True)
"""
"""`score` as another tree's interpreter runs it (`--old-python`): one process kept open, one session
name a line in, one time a line out, so its rewards take turns with this tree's on the same server."""

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


FRESH_KEYS = ("first", "warm", "import")


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


def old_scorer(python: str, control_url: str) -> tuple[subprocess.Popen[str], Callable[[str], float]]:
    """`score` in a process of `python` (another tree's venv): the process, and the call that times one
    reward in it."""
    process = subprocess.Popen(
        [python, "-c", OLD_SCORER, control_url, json.dumps(NAVIGATED)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdin is not None and process.stdout is not None

    def judge(name: str) -> float:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(name + "\n")
        process.stdin.flush()
        return float(json.loads(process.stdout.readline())["took"])

    return process, judge


def fresh_runs(
    python: str, http: httpx.Client, shop: str, control_url: str, label: str, args: Any
) -> list[Any]:
    """The fresh-process measurement with `python`: import, first reward, warm reward, per round."""
    fresh = []
    for index in range(args.rounds):
        names = [f"fresh-{label}-{index}-{n}" for n in (1, 2)]
        for name in names:
            session(http, shop, name, args.events, success=True)
        done = subprocess.run(
            [python, "-c", FRESH, control_url, *names, json.dumps(NAVIGATED)],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        fresh.append(json.loads(done.stdout))
    return fresh


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
    parser.add_argument(
        "--old-python",
        help="another tree's interpreter (e.g. the main checkout's .venv/bin/python): its `score` is timed "
        "beside this tree's (row `score-old`) and its fresh process too, against the same server",
    )
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
    old_process: subprocess.Popen[str] | None = None
    try:
        with httpx.Client(base_url=served.control_url, timeout=120) as http:
            kinds = adapters(served.control_url, http, work)
            if args.adapters:
                chosen = {"finish", *args.adapters.split(",")}
                kinds = {kind: judge for kind, judge in kinds.items() if kind in chosen}
            if args.old_python:
                old_process, kinds["score-old"] = old_scorer(args.old_python, served.control_url)
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

            if args.no_fresh:
                return 0
            trees = {
                "this tree": sys.executable,
                **({"old tree": args.old_python} if args.old_python else {}),
            }
            fresh_rows = []
            for label, python in trees.items():
                fresh = fresh_runs(python, http, shop.url, served.control_url, label.split()[0], args)
                first, warm, imported = (bench.median([f[key] for f in fresh]) * 1000 for key in FRESH_KEYS)
                fresh_rows.append(
                    [label, f"{imported:.1f}", f"{first:.2f}", f"{warm:.2f}", f"{first / warm:.2f}x"]
                )
            print(f"\nfresh process ({args.events} events; median of {args.rounds}; ms; first <= 2x warm):")
            bench.print_table(["tree", "import", "first reward", "warm reward", "first/warm"], fresh_rows)
    finally:
        if old_process is not None:
            old_process.kill()
            old_process.wait()
        served.stop()
        shop.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
