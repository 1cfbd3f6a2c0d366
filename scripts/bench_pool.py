#!/usr/bin/env python
"""Replica pools, measured: many agents over a task mix on shared sites, against the careful baseline.

A small notes site stands for a WebArena application: its pages show seeded notes, a form changes one,
and its reset endpoint (the environment-control shape) restores the seeded notes after `--reset-seconds`
(standing for a container restart). The task mix is generated: a third of the tasks change a note, the
others read one, and every note a task changes is read by other tasks, so on a shared copy a change can
decide another agent's verdict. The agents are HTTP clients through their sessions' own addresses, each
task taking `--think` seconds of the agent's own time, `--agents` of them at once.

Set-ups, each on a fresh `webarena-live serve`:

- serial: one agent, one copy, a reset before every task (`"reset": true`): the careful baseline;
- none: every agent on one shared copy (`--isolation none`), nothing reset;
- readers and exclusive: `--replicas` copies (`--isolation readers|exclusive`): changed copies reset
  in the background before their next lease, read-only ones not at all.

For each: the wall time, resets called and seconds spent in them (the endpoints count), the verdicts
that differ from the serial baseline's and the verdicts marked `exposed` (another session changed the
copy meanwhile).

    .venv/bin/python scripts/bench_pool.py [--agents 12] [--tasks 48] [--replicas 4] [--reset-seconds 2]
    .venv/bin/python scripts/bench_pool.py --site gitlab [...]

`--site gitlab` runs the GitLab-shaped site instead (scripts/support/gitlab_app.py: reads by GraphQL query
POST, sign-in by form, changes by mutation; scripts/bench_pool_gitlab.py), judged by method and by what a
request does: its reading tasks cost no reset and are never exposed, each mutating task one reset.

Targets (4 replicas, 12 agents, 48 tasks): under readers no verdict differs from the serial run; resets
no more than the mutating tasks and at most 0.4x the serial run's; the wall time at most 0.33x the
serial run's; under none, the flips it prevents are shown.
"""

from __future__ import annotations

import random
import tempfile
import threading
import time
from dataclasses import dataclass, field
from html import escape
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import requests
from bench_pool_common import arguments, run_agents, slow_reset

NOTES = {f"n{i}": f"v{i}" for i in range(8)}


class NotesSite(ThreadingHTTPServer):
    """Shared state a change of one agent shows every other: a note per page, a form that changes it."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), NotesHandler)
        self.notes = dict(NOTES)
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def reset(self) -> None:
        with self.lock:
            self.notes = dict(NOTES)


class NotesHandler(BaseHTTPRequestHandler):
    server: NotesSite

    def do_GET(self) -> None:
        key = urlsplit(self.path).path.strip("/").removeprefix("notes/")
        with self.server.lock:
            value = self.server.notes.get(key)
        if value is None:
            return self._answer(404, "<p>no such note</p>")
        self._answer(200, f'<h1>{escape(key)}</h1><p id="value">{escape(value)}</p>')

    def do_POST(self) -> None:
        key = urlsplit(self.path).path.strip("/").removeprefix("notes/")
        length = int(self.headers.get("Content-Length") or 0)
        form = parse_qs(self.rfile.read(length).decode())
        with self.server.lock:
            self.server.notes[key] = form.get("value", [""])[0]
        self.send_response(302)
        self.send_header("Location", f"/notes/{key}")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _answer(self, status: int, body: str) -> None:
        data = f"<!doctype html><title>notes</title>{body}".encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def task_mix(count: int, seed: int = 7) -> list[dict[str, Any]]:
    """`count` tasks, a third mutating (change note k to a new value), the rest reading one (its seeded
    value)."""
    rng = random.Random(seed)
    tasks = []
    for index in range(count):
        key = rng.choice(list(NOTES)[:4])  # few notes: the tasks meet on them
        task_id, mutate = 5000 + index, index % 3 == 0
        evaluators: list[dict[str, Any]]
        if mutate:
            value = f"w{index}"
            evaluators = [
                {
                    "evaluator": "AgentResponseEvaluator",
                    "results_schema": {"type": "null"},
                    "expected": {"task_type": "mutate", "status": "SUCCESS", "retrieved_data": None},
                },
                {
                    "evaluator": "NetworkEventEvaluator",
                    "expected": {
                        "url": f"__SHOPPING__/notes/{key}",
                        "http_method": "POST",
                        "response_status": 302,
                        "post_data": {"value": value},
                    },
                },
            ]
            intent = f"Change note {key} to {value}"
        else:
            evaluators = [
                {
                    "evaluator": "AgentResponseEvaluator",
                    "results_schema": {"type": "array", "items": {"type": "string"}},
                    "expected": {
                        "task_type": "retrieve",
                        "status": "SUCCESS",
                        "retrieved_data": [NOTES[key]],
                    },
                },
            ]
            intent = f"What does note {key} say?"
        tasks.append(
            {
                "sites": ["shopping"],
                "task_id": task_id,
                "intent_template_id": 5000,
                "start_urls": ["__SHOPPING__"],
                "intent": intent,
                "intent_template": intent,
                "instantiation_dict": {},
                "eval": evaluators,
                "revision": 1,
                "_key": key,
                "_value": f"w{index}" if mutate else None,
            }
        )
    return tasks


def agent(control: str, task: dict[str, Any], think: float, *, reset: bool) -> dict[str, Any]:
    """One episode: start (waiting for a copy), read or change the note through the session's address."""
    name = f"agent-{task['task_id']}"
    body = {"task_id": task["task_id"], "session": name, "wait": 600, "reset": reset, "restart": True}
    started = requests.post(f"{control}/sessions", json=body, timeout=900).json()
    site = started["start_urls"][0].rstrip("/")
    through = {"http": started["proxy"]}
    page = requests.get(
        f"{site}/notes/{task['_key']}", proxies=through, headers={"Accept": "text/html"}, timeout=60
    )
    time.sleep(think / 2)  # the agent reads the page
    if task["_value"] is not None:
        requests.post(
            f"{site}/notes/{task['_key']}",
            data={"value": task["_value"]},
            proxies=through,
            timeout=60,
            allow_redirects=False,
        )
        answer: dict[str, Any] = {"task_type": "mutate", "status": "SUCCESS", "retrieved_data": None}
    else:
        value = page.text.split('<p id="value">')[1].split("</p>")[0]
        answer = {"task_type": "retrieve", "status": "SUCCESS", "retrieved_data": [value]}
    time.sleep(think / 2)
    result = requests.post(f"{control}/sessions/{name}/finish", json=answer, timeout=120).json()
    return {
        "task_id": task["task_id"],
        "status": result["status"],
        "exposed": bool(result.get("interference", {}).get("exposed")),
    }


@dataclass
class Outcome:
    name: str
    seconds: float
    verdicts: dict[int, str]
    exposed: int
    resets: int
    reset_seconds: float
    figures: dict[str, Any] = field(default_factory=dict)


def run_setup(
    name: str,
    tasks: list[dict[str, Any]],
    *,
    replicas: int,
    isolation: str,
    agents: int,
    think: float,
    reset_seconds: float,
    reset_each: bool,
    workdir: Path,
) -> Outcome:
    sites = [NotesSite() for _ in range(replicas)]
    run = run_agents(
        workdir / name,
        "__SHOPPING__",
        [(site, slow_reset(site.reset, reset_seconds)) for site in sites],
        {},
        tasks,
        lambda control, task: agent(control, task, think, reset=reset_each),
        isolation=isolation,
        agents=agents,
    )
    return Outcome(
        name,
        run.seconds,
        {r["task_id"]: r["status"] for r in run.results},
        sum(r["exposed"] for r in run.results),
        run.resets,
        run.resets * reset_seconds,
    )


def main() -> int:
    args = arguments(__doc__ or "")
    if args.site == "gitlab":
        import bench_pool_gitlab  # the GitLab-shaped run; it never imports this script back

        with tempfile.TemporaryDirectory(prefix="bench-pool-gitlab-") as tmp:
            return bench_pool_gitlab.main(args, Path(tmp))
    tasks = task_mix(args.tasks)
    mutating = sum(t["_value"] is not None for t in tasks)
    print(
        f"{args.tasks} tasks ({mutating} mutating), {args.agents} agents, {args.replicas} replicas, "
        f"resets of {args.reset_seconds:g} s, {args.think:g} s of thinking per task",
        flush=True,
    )
    common = {"think": args.think, "reset_seconds": args.reset_seconds}
    with tempfile.TemporaryDirectory(prefix="bench-pool-") as tmp:
        work = Path(tmp)
        serial = run_setup(
            "serial", tasks, replicas=1, isolation="none", agents=1, reset_each=True, workdir=work, **common
        )
        runs = [serial] + [
            run_setup(
                name,
                tasks,
                replicas=replicas,
                isolation=name,
                agents=args.agents,
                reset_each=False,
                workdir=work,
                **common,
            )
            for name, replicas in (("none", 1), ("readers", args.replicas), ("exclusive", args.replicas))
        ]
    print(
        "\n| set-up | wall s | vs serial | resets | vs serial | s in resets | differ from serial | exposed |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for run in runs:
        differ = sum(run.verdicts[t] != serial.verdicts[t] for t in serial.verdicts)
        wall, resets = run.seconds / serial.seconds, run.resets / max(serial.resets, 1)
        print(
            f"| {run.name} | {run.seconds:.1f} | {wall:.2f}x | {run.resets} | {resets:.2f}x | "
            f"{run.reset_seconds:.1f} | {differ} | {run.exposed} |"
        )
    readers = next(run for run in runs if run.name == "readers")
    differ = sum(readers.verdicts[t] != serial.verdicts[t] for t in serial.verdicts)
    print(
        f"\nreaders: {differ} verdicts differ (target 0); resets {readers.resets} <= {mutating} mutating "
        "tasks "
        f"and {readers.resets / serial.resets:.2f}x the serial run's (target <= 0.4x); wall time "
        f"{readers.seconds / serial.seconds:.2f}x the serial run's (target <= 0.33x)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
