"""A GRPO group finishing at once: many attempts of one task, in one run directory, finished together
through the front of `serve --workers 2` (workers sharing the output directory) and of `--ray` on a
two-node cluster on 127.0.0.1 (each worker writing on its node, the front carrying the files).

Every answer is a 200 with that session's own verdict (half the group right, half wrong), the run
holds exactly one attempt per session, a repeated finish writes none, and `webarena-live report`
counts each attempt once. The race this guards against: a finish listed its files after it let go of
the task folder, so another worker's finish could move them aside first (a 500 `KeyError`, and a
retried finish wrote a second attempt). `test_run_dir.py` has the same race between two processes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import ray
import requests
from ray.cluster_utils import Cluster

from tests.support.serve_process import NAVIGATED, NAVIGATION, shop, start_serve
from webarena_live.evaluator import ATTEMPT_FILE, RESULT_FILE, task_attempts

__all__ = ["shop"]  # a fixture

pytestmark = pytest.mark.timeout(600)

GROUP = 200
RUN = "group"
PRODUCT = "/enamel-camp-mug.html"
"""Task 1003's page: an attempt whose last navigation ends here succeeds, one on the home page fails."""


def _start(control: str, name: str) -> dict[str, Any]:
    reply = requests.post(
        f"{control}/sessions", json={"task_id": 1003, "session": name, "run": RUN}, timeout=60
    )
    assert reply.status_code == 200, reply.text
    started: dict[str, Any] = reply.json()
    return started


def _browse(proxy: str, url: str) -> None:
    reply = requests.get(url, proxies={"http": proxy}, headers=NAVIGATION, timeout=30)
    assert reply.status_code == 200, reply.text


def _finish(control: str, name: str) -> requests.Response:
    return requests.post(f"{control}/sessions/{name}/finish", json=NAVIGATED, timeout=120)


def finish_group(control: str, shop: str, out: Path) -> None:
    names = [f"attempt-{i:03d}" for i in range(GROUP)]
    expected = {name: "success" if i % 2 == 0 else "failure" for i, name in enumerate(names)}
    with ThreadPoolExecutor(max_workers=16) as pool:
        started = dict(zip(names, pool.map(lambda n: _start(control, n), names), strict=True))
        assert {s["worker"] for s in started.values()} == {0, 1}
        pages = {name: f"{shop}{PRODUCT if expected[name] == 'success' else '/'}" for name in names}
        list(pool.map(lambda n: _browse(started[n]["proxy"], pages[n]), names))
    with ThreadPoolExecutor(max_workers=64) as pool:  # the whole group at once
        replies = dict(zip(names, pool.map(lambda n: _finish(control, n), names), strict=True))
    problems = {n: (r.status_code, r.text[:300]) for n, r in replies.items() if r.status_code != 200}
    assert not problems, problems
    for name, reply in replies.items():
        assert reply.json()["status"] == expected[name], (name, reply.json())

    # The same answer again gets the same result, marked repeated (README), and writes nothing more.
    again = _finish(control, names[1])
    assert again.status_code == 200 and again.headers.get("X-WebArena-Live-Repeated") == "true", again.text
    assert again.json()["status"] == replies[names[1]].json()["status"]

    run = out / RUN
    on_disk: dict[str, list[str]] = {}
    for folder in task_attempts(run, 1003):
        session = json.loads((folder / ATTEMPT_FILE).read_text())["session"]
        on_disk.setdefault(session, []).append(json.loads((folder / RESULT_FILE).read_text())["status"])
    assert sorted(on_disk) == names
    assert {name: statuses for name, statuses in on_disk.items() if len(statuses) != 1} == {}
    assert {name: statuses[0] for name, statuses in on_disk.items()} == expected

    report = subprocess.run(
        [str(Path(sys.executable).parent / "webarena-live"), "report", str(run), "--json"],
        capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    counted = json.loads(report.stdout)
    assert (counted["attempts"], counted["success"], counted["failure"]) == (GROUP, GROUP // 2, GROUP // 2)
    assert len(counted["attempts_by_task"]["1003"]) == GROUP


def test_a_group_finishing_at_once_on_two_workers(tmp_path: Path, shop: str) -> None:
    served, control, _ = start_serve(
        tmp_path, shop, tmp_path / "state", "--workers", "2", "--output-dir", str(tmp_path / "out")
    )
    try:
        finish_group(control, shop, tmp_path / "out")
    finally:
        print(served.stop()[-3000:])


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    node = {"node_ip_address": "127.0.0.1", "num_cpus": 2}
    built = Cluster(initialize_head=True, head_node_args={**node, "include_dashboard": False})
    built.add_node(**node)
    built.wait_for_nodes()
    ray.init(address=built.address, namespace="webarena-live", log_to_driver=False)
    yield built
    ray.shutdown()
    built.shutdown()


def test_a_group_finishing_at_once_on_two_ray_nodes(tmp_path: Path, shop: str, cluster: Cluster) -> None:
    out = tmp_path / "out"
    served, control, _ = start_serve(
        tmp_path,
        shop,
        tmp_path / "state",
        "--workers",
        "2",
        "--ray",
        cluster.address,
        "--output-dir",
        str(out),
    )
    try:
        finish_group(control, shop, out)
    finally:
        print(served.stop()[-3000:])
