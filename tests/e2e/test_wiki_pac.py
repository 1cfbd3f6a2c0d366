"""A session's PAC file on a real application nobody here wrote: DokuWiki from Debian's package.

The same scripted Chromium agents (tests/wiki/agents.py) run twice per task, each in a browser of
its own: once with the session's PAC file (`--proxy-pac-url`), once with its bare address
(`--proxy-server`). With PAC the trace holds the documents and form requests and no static asset
(the browser's own HAR shows those were loaded, straight from the wiki); the verdicts are the
planned ones both ways, and every run is judged three ways: live, by the reference on the HAR the proxy
wrote and by the reference on the browser's own HAR (the browser's cache on: no credentials).

Chromium sends `127.0.0.1` sites around any PAC script, so the wiki is reached as `wiki.test`:
Chromium maps the name with `--host-resolver-rules`, the proxy with tests/site/hostnames_script.py.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from playwright.async_api import async_playwright

from scripts.support import wiki_app as app
from tests.site.harness import (
    CHROMIUM,
    CHROMIUM_ARGS,
    ProxyProcess,
    free_port,
    oracle_dataset,
    start_proxy,
    write_config,
)
from tests.support.paths import TESTS
from tests.support.threeway import Judged, assert_three_ways, judge_three_ways
from tests.wiki.agents import AGENTS, Wiki
from webarena_live.evaluator import STATIC_ASSET_SUFFIXES

TASKS_FILE = TESTS / "wiki" / "tasks.json"
HOSTNAMES = TESTS / "site" / "hostnames_script.py"
TASKS = (9204, 9206, 9208)
"""A navigation judged by its URL, a login and an edit form (a mutation), a page not to change."""
PLANNED = {"correct": "success", "wrong": "failure"}
MODES = ("pac", "address")

pytestmark = pytest.mark.timeout(300)


@dataclass
class PacRun:
    task_id: int
    kind: str
    mode: str
    session: str
    live: dict[str, Any]
    trace: list[dict[str, Any]]
    browser_urls: list[str]
    output: Path
    har: Path
    """Playwright's own HAR of the run."""


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("wiki-pac")


@dataclass
class Stack:
    """One way of running the agents: a wiki of its own (so one way's edits and page locks never meet
    the other's) and a proxy in front of it."""

    wiki: str
    environments: dict[str, dict[str, list[str]]]
    proxy: ProxyProcess


@pytest.fixture(scope="module")
def stacks(workdir: Path) -> Iterator[dict[str, Stack]]:
    assert app.installed(), app.INSTALL_HINT
    with ExitStack() as cleanup:
        built = {}
        for mode in MODES:
            running = cleanup.enter_context(app.run_dokuwiki(workdir / mode / "dokuwiki", free_port()))
            wiki = running.base_url.replace("127.0.0.1", "wiki.test")
            environments = {"__WIKIPEDIA__": {"urls": [wiki]}}
            config = write_config(workdir / mode / "sites.json", environments)
            proxy = start_proxy(workdir / mode / "proxy", tasks=TASKS_FILE, config=config,
                                extra_options=[f"scripts={HOSTNAMES}"])  # fmt: skip
            cleanup.callback(proxy.stop)
            built[mode] = Stack(wiki, environments, proxy)
        yield built


async def _run(stack: Stack, workdir: Path, task_id: int, kind: str, mode: str) -> PacRun:
    proxy, wiki = stack.proxy, stack.wiki
    session = f"{mode}-{kind}-{task_id}"
    started = await asyncio.to_thread(proxy.client.start, task_id, session=session, run=f"{mode}-{kind}")
    assert started.proxy is not None
    way = (
        f"--proxy-pac-url={proxy.control_url}/sessions/{session}/proxy.pac"
        if mode == "pac"
        else f"--proxy-server={started.proxy}"
    )
    har = workdir / "browser" / session / "network.har"
    async with async_playwright() as playwright:
        args = [*CHROMIUM_ARGS, way, "--host-resolver-rules=MAP *.test 127.0.0.1"]
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=args)
        try:
            context = await browser.new_context(record_har_path=str(har))
            agent = AGENTS[task_id][0 if kind == "correct" else 1]
            answer = await agent(await context.new_page(), Wiki(wiki))
            await context.close()
        finally:
            await browser.close()
    trace = proxy.client.trace(session)
    live = requests.post(f"{proxy.control_url}/sessions/{session}/finish", json=answer, timeout=60).json()
    browser_urls = [entry["request"]["url"] for entry in json.loads(har.read_text())["log"]["entries"]]
    return PacRun(
        task_id, kind, mode, session, live, trace, browser_urls, proxy.output_dir / f"{mode}-{kind}", har
    )


@pytest.fixture(scope="module")
def runs(stacks: dict[str, Stack], workdir: Path) -> list[PacRun]:
    async def all_runs(mode: str) -> list[PacRun]:
        slots = asyncio.Semaphore(2)

        async def one(task_id: int, kind: str) -> PacRun:
            async with slots:
                return await _run(stacks[mode], workdir, task_id, kind, mode)

        # Two at a time, a task's two agents side by side, as test_wiki_e2e.py runs them.
        return list(await asyncio.gather(*(one(t, k) for t in TASKS for k in PLANNED)))

    return [run for mode in MODES for run in asyncio.run(all_runs(mode))]


def _is_static(url: str) -> bool:
    path = url.split("?", 1)[0].split("#", 1)[0]
    return path.endswith(STATIC_ASSET_SUFFIXES)


def test_with_pac_the_trace_holds_no_static_asset(runs: list[PacRun]) -> None:
    for run in runs:
        if run.mode != "pac":
            continue
        urls = [event["url"] for event in run.trace]
        assert not [url for url in urls if _is_static(url)], run.session
        assert any(event["type"] == "navigation" for event in run.trace), run.session
        assert any(_is_static(url) for url in run.browser_urls), run.session  # loaded, straight from the wiki
        if run.task_id == 9206:
            posts = [event for event in run.trace if event["method"] == "POST"]
            assert posts and any("do=login" in e["url"] or "do=edit" in e["url"] for e in run.trace)
    har = json.loads((runs[0].output / str(runs[0].task_id) / "network.har").read_text())
    assert har["log"]["entries"]


def test_verdicts_are_the_same_with_and_without_pac(runs: list[PacRun]) -> None:
    by_key = {(run.task_id, run.kind, run.mode): run.live["status"] for run in runs}
    for task_id in TASKS:
        for kind, planned in PLANNED.items():
            assert by_key[(task_id, kind, "pac")] == by_key[(task_id, kind, "address")] == planned, (
                task_id,
                kind,
            )


def test_three_way_agreement_with_the_cache_on(
    runs: list[PacRun],
    workdir: Path,
    stacks: dict[str, Stack],
    oracle_python: Path,
    official_dataset: Path,
) -> None:
    """Both ways reach the proxy without credentials, so the browser's cache is on: every run is judged
    live, by the reference on the outputs and by the reference on Playwright's own HAR
    (tests/support/threeway.py). DokuWiki's pages are never revalidated (they are sent no-store)."""
    dataset = oracle_dataset(official_dataset, TASKS_FILE, workdir / "oracle-dataset.json")
    for mode in MODES:
        config = write_config(workdir / f"oracle-config-{mode}.json", stacks[mode].environments,
                              test_data_file=dataset)  # fmt: skip
        judged = [
            Judged(run.session, run.task_id, str(run.live["status"]), run.output / str(run.task_id), run.har,
                   cache="on", planned=PLANNED[run.kind])
            for run in runs
            if run.mode == mode
        ]  # fmt: skip
        judge_three_ways(judged, oracle_python, config, workdir / "judged" / mode)
        assert_three_ways(judged)
