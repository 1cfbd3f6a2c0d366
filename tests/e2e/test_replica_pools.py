"""Many agents, one set of sites: replicas of a real application (DokuWiki from Debian's package), leases,
resets only where something changed, and the interference each verdict names.

Three seeded copies of the wiki, each with its own data directory and a reset endpoint that really
restores the seeded pages (tests/wiki/replicas.py). The task mix: 9301 changes the Ridge Loop's length,
which 9201 reads. Real Chromium agents browse through their sessions' own addresses (the browser cache
on). On one copy with `--isolation none`, the change decides the reader's verdict — it flips, and the
reader's result says `exposed` and by whom. On the three copies under `readers`, every verdict is the
one each task gets alone on a freshly reset copy, nothing is exposed, and exactly the changed copy is
reset. Every run is judged three ways (live, the reference on our files, the reference on the browser's
HAR).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from playwright.async_api import async_playwright
from playwright.sync_api import sync_playwright

from tests.site.harness import (
    CHROMIUM,
    CHROMIUM_ARGS,
    ProxyProcess,
    oracle_dataset,
    start_proxy,
    write_config,
)
from tests.support.threeway import Judged, assert_three_ways, judge_three_ways
from tests.wiki.agents import Wiki
from tests.wiki.replicas import AGENTS, NEW_LENGTH, Replica, pool_config, wiki_replicas, write_pool_tasks
from webarena_live.launch import serve_command

pytestmark = pytest.mark.timeout(420)

ALONE = {9201: "success", 9301: "success"}
"""Each task run alone on a freshly reset copy (the planned verdicts of its correct agent)."""


@dataclass
class Run:
    session: str
    task_id: int
    started: dict[str, Any]
    result: dict[str, Any]
    har: Path


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("pools")


@pytest.fixture(scope="module")
def replicas(workdir: Path) -> Iterator[list[Replica]]:
    with wiki_replicas(workdir / "wikis", 3) as built:
        yield built


def serve(workdir: Path, name: str, replicas: list[Replica], isolation: str) -> ProxyProcess:
    config = write_config(workdir / f"{name}.json", pool_config(replicas))
    tasks = write_pool_tasks(workdir / "pool-tasks.json")
    return start_proxy(workdir / name, tasks=tasks, config=config, extra_args=["--isolation", isolation])


async def agent_run(
    proxy: ProxyProcess, workdir: Path, started: dict[str, Any]
) -> tuple[dict[str, Any], Path]:
    """The task's Chromium agent through the session's own address, on the replica it was leased."""
    session, task_id = started["session"], started["task_id"]
    har = workdir / "browser" / session / "network.har"
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            context = await browser.new_context(proxy={"server": started["proxy"]}, record_har_path=str(har))
            (wiki,) = started["replicas"].values()
            answer = await AGENTS[task_id](await context.new_page(), Wiki(wiki))
            await context.close()
        finally:
            await browser.close()
    return answer, har


def dashboard(proxy: ProxyProcess, session: str, screenshot: Path) -> dict[str, Any]:
    """What the dashboard shows of the pool and of `session`'s lease (a screenshot kept to look at)."""
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(f"{proxy.control_url}/")
            page.wait_for_selector("#pool li")
            page.click(f"#sessions tr[data-session='{session}']")
            page.wait_for_selector("#session-lease:not([hidden])")
            page.screenshot(path=str(screenshot), full_page=True)
            return {
                "pool": page.locator("#pool li").all_inner_texts(),
                "summary": page.inner_text("#pool-summary"),
                "lease": page.inner_text("#session-lease"),
            }
        finally:
            browser.close()


def mix(proxy: ProxyProcess, workdir: Path, label: str, near: dict[int, str] | None = None) -> dict[int, Run]:
    """Start the reader and the writer side by side (each `near` a node, with Ray); the writer's agent
    changes the page and finishes, then the reader's agent reads it and finishes."""
    control = proxy.control_url
    started = {}
    for task_id in (9201, 9301):
        body = {"task_id": task_id, "session": f"{label}-{task_id}", "run": label}
        if near:
            body["near"] = near[task_id]
        reply = requests.post(f"{control}/sessions", json=body, timeout=30)
        assert reply.status_code == 200, reply.text
        started[task_id] = reply.json()
    runs = {}
    for task_id in (9301, 9201):
        answer, har = asyncio.run(agent_run(proxy, workdir, started[task_id]))
        session = started[task_id]["session"]
        result = requests.post(f"{control}/sessions/{session}/finish", json=answer, timeout=60).json()
        runs[task_id] = Run(session, task_id, started[task_id], result, har)
    return runs


def judge(
    runs: dict[int, Run], proxy: ProxyProcess, replicas: list[Replica], label: str, workdir: Path,
    oracle_python: Path, official_dataset: Path,
) -> None:  # fmt: skip
    """The reference on our files and on the browser's HAR, with every replica's URL under the site's
    `urls` (the config the reference reads for written runs)."""
    dataset = oracle_dataset(
        official_dataset, write_pool_tasks(workdir / "pool-tasks.json"), workdir / "dataset.json"
    )
    environments = {"__WIKIPEDIA__": {"urls": [r.url for r in replicas]}}
    config = write_config(workdir / f"oracle-{label}.json", environments, test_data_file=dataset)
    out = proxy.output_dir / label
    judged = [
        Judged(run.session, run.task_id, run.result["status"], out / str(run.task_id), run.har, cache="on")
        for run in runs.values()
    ]
    judge_three_ways(judged, oracle_python, config, workdir / "judged" / label)
    assert_three_ways(judged)


def test_one_copy_shared_the_change_flips_the_reader_and_says_so(
    replicas: list[Replica], workdir: Path, oracle_python: Path, official_dataset: Path
) -> None:
    one = replicas[:1]
    proxy = serve(workdir, "none", one, "none")
    try:
        runs = mix(proxy, workdir, "none")
        health = proxy.client.health()
        shown = dashboard(proxy, runs[9201].session, workdir / "dashboard-none.png")
    finally:
        proxy.stop()
    assert shown["pool"] == ["__WIKIPEDIA__ 0 dirty"]  # changed, and under none nothing resets it
    assert "--isolation none" in shown["summary"]
    count = runs[9201].result["interference"]["count"]  # the writer's login and its edit
    assert f"exposed: {count} changes by other sessions" in shown["lease"] and one[0].url in shown["lease"]
    reader, writer = runs[9201], runs[9301]
    assert writer.result["status"] == "success" and writer.result["interference"]["exposed"] is False
    assert reader.result["status"] == "failure"  # it read the writer's length, not the seeded one
    assert reader.result["evaluators_results"][0]["actual"]["retrieved_data"] == [
        float(NEW_LENGTH.split()[0])
    ]
    exposed = reader.result["interference"]
    assert exposed["exposed"] is True and exposed["replicas"] == {"__WIKIPEDIA__": one[0].url}
    assert {(m["session"], m["method"]) for m in exposed["mutations"]} >= {(writer.session, "POST")}
    assert health["pool"]["isolation"] == "none" and one[0].reset.calls == 0  # nothing reset unasked
    record = json.loads((proxy.output_dir / "none" / "9201" / "attempt.json").read_text())
    assert record["interference"] == exposed and record["replicas"] == exposed["replicas"]  # its own file
    judge(runs, proxy, one, "none", workdir, oracle_python, official_dataset)
    tasks = write_pool_tasks(workdir / "pool-tasks.json")
    command = [
        *serve_command()[:-1],
        "report",
        str(proxy.output_dir / "none"),
        "--json",
        "--tasks",
        str(tasks),
    ]
    figures = json.loads(
        subprocess.run(command, capture_output=True, text=True, timeout=120, check=True).stdout
    )
    assert (figures["exposed"], figures["exposed_task_ids"]) == (1, [9201])
    assert figures["unexposed"]["tasks"] == 1 and figures["unexposed"]["rate"] == 1.0  # the writer alone
    assert figures["by_site"]["wikipedia"]["exposed"] == 1 and figures["rate"] == 0.5
    shown = subprocess.run(
        [*command[:-3], "--tasks", str(tasks)], capture_output=True, text=True, timeout=120
    )
    assert "exposed: 1 of 2 attempts" in shown.stdout, shown.stdout
    requests.post(one[0].reset.url, timeout=60).raise_for_status()  # the copy back for the next test
    assert one[0].length() == "12.5 km"


def test_three_copies_under_readers_every_verdict_as_alone_none_exposed_one_reset(
    replicas: list[Replica], workdir: Path, oracle_python: Path, official_dataset: Path
) -> None:
    before = [r.reset.done for r in replicas]
    proxy = serve(workdir, "readers", replicas, "readers")
    try:
        runs = mix(proxy, workdir, "readers")
        leased = {task_id: run.started["replicas"]["__WIKIPEDIA__"] for task_id, run in runs.items()}
        assert leased[9201] != leased[9301]  # the writer holds its copy alone
        deadline = time.monotonic() + 30
        while proxy.client.health()["pool"]["sites"]["__WIKIPEDIA__"]["resetting"]:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        pool = proxy.client.health()["pool"]["sites"]["__WIKIPEDIA__"]
    finally:
        proxy.stop()
    assert {task_id: run.result["status"] for task_id, run in runs.items()} == ALONE
    assert not any(run.result["interference"]["exposed"] for run in runs.values())
    kept = json.loads((proxy.output_dir / ".pool.json").read_text())["sites"]["__WIKIPEDIA__"]
    assert (kept["resets"], kept["resets_skipped"]) == (1, 1)  # where the run report reads them
    tasks = write_pool_tasks(workdir / "pool-tasks.json")
    report = [*serve_command()[:-1], "report", str(proxy.output_dir / "readers"), "--tasks", str(tasks)]
    shown = subprocess.run(report, capture_output=True, text=True, timeout=120).stdout
    assert (
        "replicas (--isolation readers; every run of its output directory): __WIKIPEDIA__ 1 resets" in shown
    )
    resets = [r.reset.done - b for r, b in zip(replicas, before, strict=True)]
    changed = next(i for i, r in enumerate(replicas) if r.url == leased[9301])
    assert resets == [1 if i == changed else 0 for i in range(3)], resets  # only the changed copy
    assert (pool["resets"], pool["resets_skipped"]) == (1, 1)
    assert all(r.length() == "12.5 km" for r in replicas)  # the reset really restored it
    judge(runs, proxy, replicas, "readers", workdir, oracle_python, official_dataset)


def test_with_two_workers_the_front_leases_and_every_verdict_holds(
    replicas: list[Replica], workdir: Path, oracle_python: Path, official_dataset: Path
) -> None:
    """`serve --workers 2`: the leases live in the front; the traffic of each session is its worker's,
    the mutations it sees reach the front, and the front resets the changed copy."""
    before = [r.reset.done for r in replicas]
    config = write_config(workdir / "workers.json", pool_config(replicas))
    tasks = write_pool_tasks(workdir / "pool-tasks.json")
    proxy = start_proxy(workdir / "workers", tasks=tasks, config=config, extra_args=["--workers", "2"])
    try:
        runs = mix(proxy, workdir, "workers")
        assert {run.started["worker"] for run in runs.values()} == {0, 1}  # one session on each worker
        deadline = time.monotonic() + 30
        while (pool := proxy.client.health()["pool"])["sites"]["__WIKIPEDIA__"]["resetting"] or not pool[
            "sites"
        ]["__WIKIPEDIA__"]["resets"]:
            assert time.monotonic() < deadline, pool
            time.sleep(0.2)
    finally:
        proxy.stop()
    assert pool["isolation"] == "readers"  # two or more replicas: the default
    assert {task_id: run.result["status"] for task_id, run in runs.items()} == ALONE
    assert not any(run.result["interference"]["exposed"] for run in runs.values())
    assert sum(r.reset.done - b for r, b in zip(replicas, before, strict=True)) == 1
    judge(runs, proxy, replicas, "workers", workdir, oracle_python, official_dataset)


@pytest.mark.parametrize("confine", [False, True], ids=["listed", "confined"])
def test_traffic_outside_the_lease_is_listed_or_refused(
    replicas: list[Replica], workdir: Path, confine: bool
) -> None:
    config = write_config(workdir / "confine.json", pool_config(replicas))
    tasks = write_pool_tasks(workdir / "pool-tasks.json")
    extra = ["--isolation", "exclusive", *(["--confine"] if confine else [])]
    proxy = start_proxy(workdir / f"confine-{confine}", tasks=tasks, config=config, extra_args=extra)
    try:
        control = proxy.control_url
        mine = requests.post(
            f"{control}/sessions", json={"task_id": 9201, "session": "mine"}, timeout=30
        ).json()
        theirs = requests.post(
            f"{control}/sessions", json={"task_id": 9201, "session": "theirs"}, timeout=30
        ).json()
        through = {"http": mine["proxy"]}
        own = requests.get(
            f"{mine['replicas']['__WIKIPEDIA__']}/doku.php?id=start", proxies=through, timeout=30
        )
        other = requests.get(
            f"{theirs['replicas']['__WIKIPEDIA__']}/doku.php?id=start", proxies=through, timeout=30
        )
        outside = requests.get(f"{control}/health", proxies=through, timeout=30)  # on no site of the map
        view = requests.get(f"{control}/sessions/mine", timeout=10).json()
    finally:
        proxy.stop()
    assert own.status_code == 200
    listed = view["outside_lease"]
    assert listed["count"] == 2, listed
    assert (
        "the session holds replica" in listed["recent"][0]
        and "no site of the site map" in listed["recent"][1]
    )
    if confine:
        assert other.status_code == outside.status_code == 403
        assert "outside this session's sites" in other.text and "--confine" in other.text
    else:
        assert other.status_code == 200 and outside.status_code == 200


def test_with_the_ray_fleet_the_leases_live_in_the_front_whatever_node_captures(
    replicas: list[Replica], workdir: Path, oracle_python: Path, official_dataset: Path
) -> None:
    """`serve --workers 2 --ray`: a worker on each of two Ray nodes (on 127.0.0.1), the reader's traffic
    captured on one, the writer's on the other; the front leases, gathers both nodes' mutations and
    resets the changed copy."""
    from ray.cluster_utils import Cluster  # the ray extra is part of the test install

    node = {"node_ip_address": "127.0.0.1", "num_cpus": 2}
    cluster = Cluster(initialize_head=True, head_node_args={**node, "include_dashboard": False})
    cluster.add_node(**node)
    cluster.wait_for_nodes()
    before = [r.reset.done for r in replicas]
    config = write_config(workdir / "ray.json", pool_config(replicas))
    tasks = write_pool_tasks(workdir / "pool-tasks.json")
    try:
        proxy = start_proxy(workdir / "ray", tasks=tasks, config=config, timeout=180,
                            extra_args=["--workers", "2", "--ray", cluster.address])  # fmt: skip
        try:
            nodes = sorted(w["node"] for w in proxy.client.health()["workers"])
            runs = mix(proxy, workdir, "ray", near={9201: nodes[0], 9301: nodes[1]})
            deadline = time.monotonic() + 30
            while not (pool := proxy.client.health()["pool"]["sites"]["__WIKIPEDIA__"])["resets"]:
                assert time.monotonic() < deadline, pool
                time.sleep(0.2)
            quit = abandon_on_a_node(proxy, nodes[1])
        finally:
            proxy.stop()
    finally:
        cluster.shutdown()
    assert quit["abandoned"]["lease_ended"] == "abandoned" and quit["page"] == 410
    assert quit["finish"]["lease_ended"] == "abandoned" and quit["leases_after"] == 0
    assert {run.started["node"] for run in runs.values()} == set(nodes)  # one session on each node
    assert {task_id: run.result["status"] for task_id, run in runs.items()} == ALONE
    assert not any(run.result["interference"]["exposed"] for run in runs.values())
    assert sum(r.reset.done - b for r, b in zip(replicas, before, strict=True)) == 1
    judge(runs, proxy, replicas, "ray", workdir, oracle_python, official_dataset)


def abandon_on_a_node(proxy: ProxyProcess, node: str) -> dict[str, Any]:
    """A reader on a worker of `node` that gives up: its lease ends at the front, the worker's proxy
    answers its address itself, its finish says so."""
    control = proxy.control_url
    body = {"task_id": 9201, "session": "ray-quitter", "near": node}
    started = requests.post(f"{control}/sessions", json=body, timeout=30).json()
    wiki, through = started["replicas"]["__WIKIPEDIA__"], {"http": started["proxy"]}
    assert requests.get(f"{wiki}/doku.php?id=start", proxies=through, timeout=30).status_code == 200
    abandoned = requests.post(f"{control}/sessions/ray-quitter/abandon", json={"reason": "done"}, timeout=30)
    page = requests.get(f"{wiki}/doku.php?id=start", proxies=through, timeout=30).status_code
    answer = {"task_type": "RETRIEVE", "status": "SUCCESS", "retrieved_data": ["x"]}
    finish = requests.post(f"{control}/sessions/ray-quitter/finish", json=answer, timeout=60).json()
    leases = requests.get(f"{control}/health", timeout=30).json()["pool"]["leases"]
    return {"abandoned": abandoned.json(), "page": page, "finish": finish, "leases_after": leases}
