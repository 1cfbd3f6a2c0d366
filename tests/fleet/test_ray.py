"""`webarena-live serve --workers 2 --ray ADDRESS` on a real two-node Ray cluster on 127.0.0.1.

The cluster is Ray's own (`ray.cluster_utils.Cluster`: a head and a second node, each a raylet of
its own, every node given `node_ip_address="127.0.0.1"`). The two workers land on the two nodes;
HTTP clients and Chromium agents (each asking for a worker `near` a node) drive the demo shop
through their sessions' own addresses; every verdict must be the planned one, the three files of
each run must land in the one output directory of the `serve` process, and the reference must give
each written run the same verdict. Then a worker actor is killed (Ray restarts it; its sessions
resume, every event kept), and last the second node is stopped (its sessions are reported lost,
the others finish right).
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import ray  # the ray extra is part of the test install
import requests
from playwright.sync_api import sync_playwright
from ray.cluster_utils import Cluster

from tests.site.harness import CHROMIUM, CHROMIUM_ARGS, oracle_dataset, oracle_verdicts, write_config
from tests.support.oracle_bridge import ask_oracle
from tests.support.paths import EXAMPLES
from tests.support.serve_process import (
    NAVIGATED,
    Served,
    browse,
    finish,
    run_chromium_agent,
    shop,
    start_serve,
    start_session,
    trace_urls,
)
from webarena_live.evaluator import default_tasks_path
from webarena_live.fleet.workers.ray_workers import WAIT_SLICE
from webarena_live.launch import serve_command

__all__ = ["shop"]  # a fixture

pytestmark = pytest.mark.timeout(300)

PRODUCT = "/enamel-camp-mug.html"
PAGES = ("enamel-camp-mug.html", "stoneware-coffee-mug-12oz.html", "double-wall-travel-mug.html")
"""examples/ray_rollout.py's pages: an episode's reward is 1 when it opens the first."""
CHROMIUM_TASKS = {1001: "success", 1007: "failure"}
FAST_HEALTH_CHECKS = {"health_check_period_ms": 500, "health_check_failure_threshold": 4}
"""A stopped node is known dead within seconds (Ray's defaults take about half a minute)."""


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[Cluster, Any]]:
    node = {"node_ip_address": "127.0.0.1", "num_cpus": 2}  # a worker of each fleet on each node
    built = Cluster(
        initialize_head=True,
        head_node_args={**node, "include_dashboard": False, "_system_config": FAST_HEALTH_CHECKS},
    )
    second = built.add_node(**node)
    built.wait_for_nodes()
    ray.init(address=built.address, namespace="webarena-live", log_to_driver=False)
    yield built, second
    ray.shutdown()
    built.shutdown()


@pytest.fixture(scope="module")
def fleet(
    tmp_path_factory: pytest.TempPathFactory, shop: str, cluster: tuple[Cluster, Any]
) -> Iterator[tuple[Served, Path]]:
    tmp = tmp_path_factory.mktemp("ray")
    built, _ = cluster
    served, _, _ = start_serve(
        tmp, shop, tmp / "state", "--workers", "2", "--ray", built.address, "--output-dir", str(tmp / "out")
    )
    yield served, tmp / "out"
    print(served.stop()[-5000:])


def _health(control: str) -> dict[str, Any]:
    health: dict[str, Any] = requests.get(f"{control}/health", timeout=10).json()
    return health


def test_sixteen_sessions_on_two_nodes(
    fleet: tuple[Served, Path], shop: str, tmp_path: Path, oracle_python: Path, official_dataset: Path
) -> None:
    served, out = fleet
    control = served.control
    health = _health(control)
    nodes = {entry["NodeID"] for entry in ray.nodes() if entry["Alive"]}
    assert [w["state"] for w in health["workers"]] == ["up", "up"]
    assert {w["node"] for w in health["workers"]} == nodes and len(nodes) == 2  # one worker per node

    names = [f"http-{i}" for i in range(14)]
    started = {name: start_session(control, name) for name in names}
    assert {s["node"] for s in started.values()} == nodes
    plans = {
        name: ([f"/?by={name}", PRODUCT] if i % 2 == 0 else [PRODUCT, f"/?by={name}"])
        for i, name in enumerate(names)
    }
    with ThreadPoolExecutor(max_workers=6) as pool:
        list(pool.map(lambda n: [browse(started[n]["proxy"], shop, p) for p in plans[n]], names))
    by_node = sorted(nodes)
    chromium = [
        run_chromium_agent(control, task_id, near=near)
        for task_id, near in zip(CHROMIUM_TASKS, by_node, strict=True)
    ]
    assert [run["node"] for run in chromium] == by_node  # each placed near its agent

    listed = {
        view["session"]: view for view in requests.get(f"{control}/sessions", timeout=10).json()["sessions"]
    }
    assert {listed[name]["node"] for name in names} == nodes
    assert [w["running"] for w in _health(control)["workers"]] == [8, 8]
    for name in names:
        assert trace_urls(control, name) == [f"{shop}{path}" for path in plans[name]]

    planned = {}
    for i, name in enumerate(names):
        verdict = finish(control, name, NAVIGATED).json()
        planned[name] = "success" if i % 2 == 0 else "failure"
        assert verdict["status"] == planned[name], (name, verdict)
        view = requests.get(f"{control}/sessions/{name}", timeout=10).json()
        assert view["outputs"]["network.har"] == str(out / name / "1003" / "network.har")
    for run in chromium:
        verdict = finish(control, run["session"], run["answer"]).json()
        planned[run["session"]] = CHROMIUM_TASKS[run["task_id"]]
        assert verdict["status"] == planned[run["session"]], (run["session"], verdict)

    # The files of every run, from both nodes, in the one output directory in the reference's layout.
    task_of = {**dict.fromkeys(names, 1003), **{run["session"]: run["task_id"] for run in chromium}}
    for name, task_id in task_of.items():
        folder = out / name / str(task_id)
        assert sorted(p.name for p in folder.iterdir()) == [
            "agent_response.json",
            "attempt.json",
            "eval_result.json",
            "network.har",
        ]
        assert json.loads((folder / "eval_result.json").read_text())["status"] == planned[name]
    for name in names:
        entries = json.loads((out / name / "1003" / "network.har").read_text())["log"]["entries"]
        assert [e["request"]["url"] for e in entries] == [f"{shop}{path}" for path in plans[name]]
    assert [w["running"] for w in _health(control)["workers"]] == [0, 0]

    # The reference, on every written run.
    dataset = oracle_dataset(official_dataset, default_tasks_path(), tmp_path / "dataset.json")
    config = write_config(
        tmp_path / "oracle.json", {"__SHOPPING__": {"urls": [shop]}}, test_data_file=dataset
    )
    request = {"mode": "files", "config": str(config), "cases": [
        {"task_id": task_id, "response": str(out / name / str(task_id) / "agent_response.json"),
         "har": str(out / name / str(task_id) / "network.har")}
        for name, task_id in task_of.items()
    ]}  # fmt: skip
    theirs = ask_oracle(oracle_python, request)
    assert [v["status"].rsplit(".", 1)[-1].lower() for v in theirs] == [planned[name] for name in task_of]

    # `webarena-live evaluate` judges a carried run as it judges one written on this machine.
    site_map = write_config(tmp_path / "sites.json", {"__SHOPPING__": {"urls": [shop]}})
    evaluate = [*serve_command()[:-1], "evaluate", "--output-dir", str(out / names[1]), "--config",
                str(site_map), "--tasks", "demo"]  # fmt: skip
    judged = subprocess.run(evaluate, capture_output=True, text=True, timeout=120)
    assert judged.returncode == 0, judged.stdout + judged.stderr
    rejudged = json.loads((out / names[1] / "1003" / "eval_result.json").read_text())
    assert rejudged["status"] == planned[names[1]]

    # The run view reads the one output directory (the front answers it).
    figures = requests.get(f"{control}/report", params={"run": names[0]}, timeout=30).json()
    assert (figures["tasks"], figures["success"]) == (1, 1), figures


def test_the_fronts_log_is_plain_and_names_the_pids_ray_prints(fleet: tuple[Served, Path]) -> None:
    """After the sessions above: the workers' lines came through the front's log without colour codes
    or Ray's warning about its SIGTERM handler, and the banner names each worker by the pid Ray prints
    beside its lines."""
    served, _ = fleet
    text = served.log.read_text(errors="replace")
    assert "\x1b[" not in text and "SIGTERM handler is not set" not in text, text[-3000:]
    banner = [int(pid) for pid in re.findall(r"^  worker \d+ +pid (\d+) \(serve \d+\)", text, re.MULTILINE)]
    printed = {int(pid) for pid in re.findall(r"\(ServeWorker pid=(\d+)", text)}
    assert len(banner) == 2 and set(banner) <= printed, (banner, printed, text[-3000:])


def test_a_killed_worker_actor_comes_back_with_its_sessions(fleet: tuple[Served, Path], shop: str) -> None:
    served, out = fleet
    control = served.control
    names = [f"kill-{i}" for i in range(4)]
    started = {name: start_session(control, name) for name in names}
    victim = 1
    assert sum(started[name]["worker"] == victim for name in names) == 2
    for name in names:
        browse(started[name]["proxy"], shop, f"/?by={name}")
    before = _health(control)["workers"][victim]
    killed = time.monotonic()
    ray.kill(ray.get_actor(before["actor"]), no_restart=False)

    for name in names:  # the agents carry on at their addresses, retrying while the worker comes back
        browse(started[name]["proxy"], shop, PRODUCT)
    deadline = time.monotonic() + 90
    while (after := _health(control)["workers"][victim])["state"] != "up" or after["restarts"] == 0:
        assert time.monotonic() < deadline, after
        time.sleep(0.2)
    # The front learns of the new actor as soon as it answers, not when its wait on the old one ends.
    assert time.monotonic() - killed < WAIT_SLICE
    assert after["pid"] != before["pid"] and after["restarts"] == before["restarts"] + 1
    assert (after["node"], after["proxy_port"]) == (before["node"], before["proxy_port"])
    for name in names:
        assert trace_urls(control, name) == [f"{shop}/?by={name}", f"{shop}{PRODUCT}"], name
        assert finish(control, name, NAVIGATED).json()["status"] == "success"
        har = json.loads((out / name / "1003" / "network.har").read_text())
        assert len(har["log"]["entries"]) == 2


def test_a_killed_serve_comes_back_under_its_actor_and_refuses_nothing(
    fleet: tuple[Served, Path], shop: str
) -> None:
    """SIGKILL of a Ray worker's `serve` on its node: its actor (which keeps its listening sockets)
    starts it again; an agent's request meanwhile waits instead of being refused, and is captured."""
    served, _ = fleet
    control = served.control
    started = start_session(control, "serve-kill", near=_health(control)["workers"][0]["node"])
    assert started["worker"] == 0
    browse(started["proxy"], shop, "/?by=serve-kill")
    before = _health(control)["workers"][0]
    os.kill(before["pid"], signal.SIGKILL)
    browse(started["proxy"], shop, PRODUCT, patience=0)  # no retry: the first try must get through
    deadline = time.monotonic() + 60
    while (after := _health(control)["workers"][0])["state"] != "up" or after["restarts"] == 0:
        assert time.monotonic() < deadline, after
        time.sleep(0.2)
    assert after["pid"] != before["pid"] and after["actor"] == before["actor"]
    assert trace_urls(control, "serve-kill") == [f"{shop}/?by=serve-kill", f"{shop}{PRODUCT}"]
    assert finish(control, "serve-kill", NAVIGATED).json()["status"] == "success"


def test_the_ray_rollout_example(
    cluster: tuple[Cluster, Any], shop: str, tmp_path: Path, oracle_python: Path, official_dataset: Path
) -> None:
    """examples/ray_rollout.py as the README runs it, on this cluster: eight Chromium agents as Ray tasks
    on task 1003, each session near its agent, every episode's verdict the one its page deserves; every
    episode is an attempt in the run directory, `report` gives the rollout's mean over the eight, and
    the reference judges the last attempt's folder as the proxy did."""
    built, _ = cluster
    config = write_config(tmp_path / "sites.json", {"__SHOPPING__": {"urls": [shop]}})
    out = tmp_path / "out"
    episodes = 8
    run = subprocess.run(
        [sys.executable, str(EXAMPLES / "ray_rollout.py"), "--address", built.address, "--config",
         str(config), "--output-dir", str(out), "--episodes", str(episodes), "--agent-cpus", "0"],
        capture_output=True, text=True, timeout=280, cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-5000:]
    expected = [
        1.0 if random.Random(i).choice(PAGES) == PRODUCT.lstrip("/") else 0.0 for i in range(episodes)
    ]
    for index, reward in enumerate(expected):
        assert f"episode {index}: reward {reward} (agent on node" in run.stdout, run.stdout
    assert run.stdout.count("near its worker") == episodes and "not near" not in run.stdout
    assert f"mean reward {sum(expected) / episodes:.3f}" in run.stdout
    kept = [out / "ray-rollout" / "1003", *(out / "ray-rollout" / ".attempts" / "1003").iterdir()]
    assert len(kept) == episodes and all((folder / "eval_result.json").is_file() for folder in kept)

    report = [*serve_command()[:-1], "report", str(out / "ray-rollout"), "--json", "--tasks", "demo"]
    figures = json.loads(
        subprocess.run(report, capture_output=True, text=True, timeout=120, check=True).stdout
    )
    assert (figures["tasks"], figures["attempts"], figures["success"]) == (1, episodes, sum(expected))
    assert figures["rate"] == pytest.approx(sum(expected) / episodes)
    last = json.loads((out / "ray-rollout" / "1003" / "eval_result.json").read_text())["status"]
    dataset = oracle_dataset(official_dataset, default_tasks_path(), tmp_path / "dataset.json")
    oracle_config = write_config(tmp_path / "oracle.json", {"__SHOPPING__": {"urls": [shop]}},
                                 test_data_file=dataset)  # fmt: skip
    assert oracle_verdicts(oracle_python, out / "ray-rollout", oracle_config)[1003]["status"] == last


def test_ctrl_c_keeps_the_journals_and_a_restart_resumes_every_session(
    cluster: tuple[Cluster, Any], shop: str, tmp_path: Path, oracle_python: Path, official_dataset: Path
) -> None:
    """Ctrl-C of `serve --ray` mid-run, then `serve --ray` again on the same output directory: every
    unfinished session is listed resumable on the node that holds its journal and resumes there with
    its events; the reference agrees on every written run."""
    built, _ = cluster
    out = tmp_path / "out"
    args = ("--workers", "2", "--ray", built.address, "--output-dir", str(out))
    served, control, _ = start_serve(tmp_path, shop, tmp_path / "state", *args)
    names = [f"again-{i}" for i in range(4)]
    started = {name: start_session(control, name) for name in names}
    for name in names:
        browse(started[name]["proxy"], shop, f"/?by={name}")
    served.stop()
    served, control, _ = start_serve(tmp_path, shop, tmp_path / "state", *args)
    try:
        listed = {v["session"]: v for v in requests.get(f"{control}/sessions", timeout=30).json()["sessions"]}
        for name in names:
            assert listed[name]["state"] == "resumable" and listed[name]["node"] == started[name]["node"]
            body = {"task_id": 1003, "session": name, "run": name, "resume_journal": True}
            resumed = requests.post(f"{control}/sessions", json=body, timeout=30).json()
            assert resumed["resumed_events"] == 1 and resumed["node"] == started[name]["node"], resumed
            browse(resumed["proxy"], shop, PRODUCT)
            assert trace_urls(control, name) == [f"{shop}/?by={name}", f"{shop}{PRODUCT}"]
            assert finish(control, name, NAVIGATED).json()["status"] == "success"
    finally:
        served.stop()
    dataset = oracle_dataset(official_dataset, default_tasks_path(), tmp_path / "dataset.json")
    config = write_config(
        tmp_path / "oracle.json", {"__SHOPPING__": {"urls": [shop]}}, test_data_file=dataset
    )
    cases = [{"task_id": 1003, "response": str(out / name / "1003" / "agent_response.json"),
              "har": str(out / name / "1003" / "network.har")} for name in names]  # fmt: skip
    theirs = ask_oracle(oracle_python, {"mode": "files", "config": str(config), "cases": cases})
    assert [v["status"].rsplit(".", 1)[-1].lower() for v in theirs] == ["success"] * len(names)


def test_a_stopped_node_loses_its_sessions_and_the_rest_finish(
    fleet: tuple[Served, Path], shop: str, cluster: tuple[Cluster, Any], tmp_path: Path
) -> None:
    """Last in this file: it stops the second node."""
    served, out = fleet
    control = served.control
    built, second = cluster
    names = [f"node-{i}" for i in range(4)]
    started = {name: start_session(control, name) for name in names}
    gone = [name for name in names if started[name]["node"] == second.node_id]
    kept = [name for name in names if name not in gone]
    assert len(gone) == 2 and len(kept) == 2
    for name in names:
        browse(started[name]["proxy"], shop, f"/?by={name}")

    with sync_playwright() as playwright:  # the dashboard, open while the node goes
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=list(CHROMIUM_ARGS))
        try:
            page = browser.new_page(viewport={"width": 1366, "height": 768})
            page.goto(f"{control}/")
            page.wait_for_selector(f'#sessions tbody tr[data-session="{gone[0]}"]', timeout=10_000)
            built.remove_node(second)
            row = page.wait_for_selector(
                f'#sessions tbody tr[data-session="{gone[0]}"] td.lost', timeout=60_000
            )
            assert row is not None and "left the Ray cluster" in row.inner_text()
            page.screenshot(path=str(tmp_path / "dashboard-lost.png"))
        finally:
            browser.close()
    deadline = time.monotonic() + 60
    while True:
        listed = {v["session"]: v for v in requests.get(f"{control}/sessions", timeout=10).json()["sessions"]}
        if all(listed.get(name, {}).get("state") == "lost" for name in gone):
            break
        assert time.monotonic() < deadline, listed
        time.sleep(0.2)
    for name in gone:
        assert "left the Ray cluster" in listed[name]["reason"] and listed[name]["node"] == second.node_id
        refused = requests.post(f"{control}/sessions/{name}/finish", json=NAVIGATED, timeout=10)
        assert refused.status_code == 410 and refused.json()["error"] == "session_lost"
    worker = _health(control)["workers"][1]  # lost, or back afresh on the head node's free CPU
    assert worker["state"] == "lost" or (worker["state"] == "up" and worker["node"] != second.node_id), worker

    for name in kept:  # the run goes on on the other node
        browse(started[name]["proxy"], shop, PRODUCT)
        assert finish(control, name, NAVIGATED).json()["status"] == "success"
        assert (out / name / "1003" / "eval_result.json").is_file()
    again = start_session(control, gone[0])  # a lost name starts again, on a worker that is up
    assert again["node"] != second.node_id
    assert "is lost" in served.log_tail(1_000_000)
