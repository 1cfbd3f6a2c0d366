"""A replica pool that holds on GitLab-shaped traffic: reads by GraphQL query POST and sign-in by form
never mark a copy changed, a GraphQL mutation does (webarena_live.replicas.changes).

Three copies of our GitLab-shaped site (scripts/support/gitlab_app.py: a real graphql-core endpoint, sign-in
by form, an issue list whose data loads by query POSTs from the page's script, issues created by mutation),
each with an environment-control style reset endpoint. One writer (Chromium, creates an issue) and
readers (Chromium and plain HTTP agents, each signing in and loading the list by two GraphQL requests),
under `readers`, `exclusive` and `none`, in one process, with `--workers 2` and on a two-node Ray
cluster. Always: no reader is exposed by another's reads or sign-in, the writer's mutation is the one
change and is named in the interference of whoever shared its copy, the resets are counted exactly (one
under `readers` and `exclusive`, none under `none`), `/health` counts the reads by rule, and every
verdict is the reference's on the HAR the proxy wrote (and on the browser's own).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

from scripts.support.gitlab_app import Replica, gitlab_replicas, pool_config
from tests.gitlab.agents import run_chromium, run_http
from tests.site.harness import ProxyProcess, oracle_dataset, start_proxy, write_config
from tests.support.threeway import Judged, assert_three_ways, judge_three_ways

pytestmark = pytest.mark.timeout(600)

TASKS = Path(__file__).resolve().parents[1] / "gitlab" / "tasks.json"
WRITER = ("w", 9403, "chromium")
READERS = [("r1", 9401, "chromium"), ("r2", 9402, "http"), ("r3", 9402, "chromium")]
"""Started after the writer, in this order; under `exclusive` r3 waits for the second wave (three copies)."""
LATE = ("r4", 9402, "http")
"""Started once the first wave finished: under `readers` and `exclusive` it must find the seed."""
JUDGED: list[Judged] = []
"""Every run of the module, judged by the reference at the end (`test_every_verdict_is_the_references`)."""


@dataclass
class Run:
    session: str
    task_id: int
    kind: str
    started: dict[str, Any]
    answer: dict[str, Any] | None = None
    result: dict[str, Any] | None = None
    har: Path | None = None

    @property
    def replica(self) -> str:
        return str(self.started["replicas"]["__GITLAB__"])


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gitlab-pools")


@pytest.fixture(scope="module")
def replicas() -> Iterator[list[Replica]]:
    with gitlab_replicas(3) as built:
        yield built


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    from ray.cluster_utils import Cluster  # the ray extra is part of the test install

    node = {"node_ip_address": "127.0.0.1", "num_cpus": 2}
    built = Cluster(initialize_head=True, head_node_args={**node, "include_dashboard": False})
    built.add_node(**node)
    built.wait_for_nodes()
    yield built
    built.shutdown()


def start(proxy: ProxyProcess, label: str, spec: tuple[str, int, str], **extra: Any) -> Run:
    name, task_id, kind = spec
    session = f"{label}-{name}"
    body = {"task_id": task_id, "session": session, "run": session, **extra}  # a run each: its own folder
    reply = requests.post(f"{proxy.control_url}/sessions", json=body, timeout=60)
    assert reply.status_code == 200, reply.text
    return Run(session, task_id, kind, reply.json())


def act(run: Run, workdir: Path) -> None:
    """The run's agent through the session's own proxy address, on its leased copy."""
    address = run.started["proxy"]
    if run.kind == "http":
        run.answer = run_http(run.task_id, address, run.replica)
        return
    run.har = workdir / "browser" / run.session / "network.har"
    run.answer = asyncio.run(run_chromium(run.task_id, address, run.replica, run.har))


def finish(proxy: ProxyProcess, run: Run) -> None:
    reply = requests.post(f"{proxy.control_url}/sessions/{run.session}/finish", json=run.answer, timeout=60)
    assert reply.status_code == 200, reply.text
    run.result = reply.json()


def in_parallel(runs: list[Run], workdir: Path) -> None:
    failures: list[BaseException] = []

    def one(run: Run) -> None:
        try:
            act(run, workdir)
        except BaseException as error:  # told to the test below
            failures.append(error)

    threads = [threading.Thread(target=one, args=(run,)) for run in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(180)
    assert not failures, failures


def scenario(
    proxy: ProxyProcess, replicas: list[Replica], workdir: Path, label: str, isolation: str
) -> tuple[dict[str, Run], dict[str, Any]]:
    """The writer and the readers side by side (the writer's change lands while they hold their copies),
    then a late reader; `/health`'s GitLab entry once the pool settled."""
    first = READERS if isolation != "exclusive" else READERS[:2]
    writer = start(proxy, label, WRITER)
    readers = [start(proxy, label, spec) for spec in first]
    act(writer, workdir)
    in_parallel(readers, workdir)
    for run in [*readers, writer]:
        finish(proxy, run)
    second = [READERS[2], LATE] if isolation == "exclusive" else [LATE]
    later = [start(proxy, label, spec, wait=60) for spec in second]
    in_parallel(later, workdir)
    for run in later:
        finish(proxy, run)
    runs = {run.session.split("-")[-1]: run for run in [writer, *readers, *later]}
    sign_ins, queries = len(runs), 2 * len(runs)  # each loads the list: a batch of two, then one query
    deadline = time.monotonic() + 30
    while True:  # resets run in the background; a fleet's front gathers its workers' counts every few s
        site = proxy.client.health()["pool"]["sites"]["__GITLAB__"]
        settled = site["resetting"] == 0 and site["reads_by_rule"].get("gitlab graphql query") == queries
        if settled or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert site["reads_by_rule"] == {"gitlab sign-in": sign_ins, "gitlab graphql query": queries}, site
    for run in runs.values():
        assert run.result is not None
        output = proxy.output_dir / run.session / str(run.task_id)
        JUDGED.append(Judged(run.session, run.task_id, run.result["status"], output, run.har, cache="on"))
    return runs, site


def check(runs: dict[str, Run], site: dict[str, Any], replicas: list[Replica], isolation: str,
          before: list[int]) -> None:  # fmt: skip
    writer = runs["w"]
    first_wave = {"r1", "r2"} | ({"r3"} if isolation != "exclusive" else set())
    assert writer.result is not None and writer.result["status"] == "success", writer.result
    assert writer.result["interference"]["exposed"] is False  # the readers changed nothing
    for name, run in runs.items():
        if name == "w":
            continue
        assert run.result is not None
        interference = run.result["interference"]
        # never exposed by another's reads or sign-in: whatever is named is the writer's mutation
        assert {(m["session"], m["method"]) for m in interference["mutations"]} <= {(writer.session, "POST")}
        shared = run.replica == writer.replica and name in first_wave
        assert interference["exposed"] is shared, (name, interference)
        if shared:  # the change is named: the writer's one mutation, its GraphQL POST
            (named,) = interference["mutations"]
            assert named["url"] == f"{writer.replica}/api/graphql", named
        planned = "failure" if shared and run.task_id == 9402 else "success"  # it counted the new issue
        assert run.result["status"] == planned, (name, run.result)
    resets = sum(r.reset.done - b for r, b in zip(replicas, before, strict=True))
    assert (site["resets"], resets) == ((0, 0) if isolation == "none" else (1, 1)), site
    if isolation != "none":
        assert [r.site.open_count() for r in replicas] == [3, 3, 3]  # the changed copy is back to its seed
        assert all(runs[name].replica != writer.replica for name in first_wave)  # no reader beside a writer


def served(workdir: Path, label: str, replicas: list[Replica], isolation: str, *extra: str) -> ProxyProcess:
    for replica in replicas:
        replica.site.restore()
    config = write_config(workdir / f"{label}.json", pool_config(replicas))
    return start_proxy(workdir / label, tasks=TASKS, config=config, timeout=180,
                       extra_args=["--isolation", isolation, *extra])  # fmt: skip


@pytest.mark.parametrize("isolation", ["readers", "exclusive", "none"])
def test_one_process(replicas: list[Replica], workdir: Path, isolation: str) -> None:
    before = [r.reset.done for r in replicas]
    proxy = served(workdir, f"one-{isolation}", replicas, isolation)
    try:
        runs, site = scenario(proxy, replicas, workdir, f"one-{isolation}", isolation)
    finally:
        proxy.stop()
    check(runs, site, replicas, isolation, before)


@pytest.mark.parametrize("isolation", ["readers", "exclusive", "none"])
def test_two_workers(replicas: list[Replica], workdir: Path, isolation: str) -> None:
    before = [r.reset.done for r in replicas]
    proxy = served(workdir, f"workers-{isolation}", replicas, isolation, "--workers", "2")
    try:
        runs, site = scenario(proxy, replicas, workdir, f"workers-{isolation}", isolation)
    finally:
        proxy.stop()
    check(runs, site, replicas, isolation, before)


@pytest.mark.parametrize("isolation", ["readers", "exclusive", "none"])
def test_two_ray_nodes(replicas: list[Replica], workdir: Path, cluster: Any, isolation: str) -> None:
    before = [r.reset.done for r in replicas]
    label = f"ray-{isolation}"
    proxy = served(workdir, label, replicas, isolation, "--workers", "2", "--ray", cluster.address)
    try:
        nodes = {w["node"] for w in proxy.client.health()["workers"]}
        runs, site = scenario(proxy, replicas, workdir, label, isolation)
    finally:
        proxy.stop()
    assert len(nodes) == 2 and {run.started["node"] for run in runs.values()} <= nodes
    check(runs, site, replicas, isolation, before)


def test_every_verdict_is_the_references(
    replicas: list[Replica], workdir: Path, oracle_python: Path, official_dataset: Path
) -> None:
    """The reference on the proxy's HAR (and on the browser's own, for Chromium) of every run above."""
    if not JUDGED:
        pytest.fail("no run to judge: run this module's tests together")
    dataset = oracle_dataset(official_dataset, TASKS, workdir / "dataset.json")
    environments = {"__GITLAB__": {"urls": [r.url for r in replicas]}}
    config = write_config(workdir / "oracle.json", environments, test_data_file=dataset)
    judge_three_ways(JUDGED, oracle_python, config, workdir / "judged")
    assert_three_ways(JUDGED)
    assert {run.live for run in JUDGED} >= {"success"}
    print(json.dumps({run.label: run.verdicts for run in JUDGED}, indent=1))
