"""kiwix-serve, the server of WebArena's wikipedia site, with the browser's cache on and off.

A small ZIM (tests/kiwix/app.py) served by Debian's kiwix-serve; scripted Chromium agents browse it
through a real `webarena-live serve`, each run in a session of its own, once with the cache on (the
session's own address: the README's recommended way) and once off (proxy credentials). kiwix-serve
lets a browser keep an article for a month, so with the cache on a visited article comes from the
cache without any request (a link to it, going back), and a reload revalidates it: a `304` on the
wire, the article to the page. Every run is judged three ways (tests/support/threeway.py): live, the
reference on our network.har and the reference on Playwright's own HAR of the run; the count of 304s
met is printed and must not be zero with the cache on.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page

from tests.kiwix.app import BOOK, build_zim, running_kiwix
from tests.site.harness import (
    ProxyProcess,
    free_port,
    oracle_dataset,
    start_proxy,
    write_config,
)
from tests.support.paths import TESTS
from tests.support.threeway import Agent, Judged, assert_three_ways, judge_three_ways, run_agents

TASKS_FILE = TESTS / "kiwix" / "tasks.json"
NAVIGATED = {"task_type": "navigate", "status": "SUCCESS", "retrieved_data": None}

pytestmark = pytest.mark.timeout(300)


def _open(page: Page, base: str, first: str, then: str | None = None) -> None:
    page.goto(f"{base}/{BOOK}/Main_Page")
    with page.expect_navigation():
        page.click(f"#to-{first}")
    if then is not None:
        with page.expect_navigation():
            page.click(f"#to-{then}")


def _reload(page: Page) -> None:
    page.reload()
    page.wait_for_selector("#title")


def _back(page: Page) -> None:
    page.go_back()
    page.wait_for_selector("#title")


def reload_answer(page: Page, base: str) -> None:
    _open(page, base, "falcon")
    _reload(page)


def reload_other(page: Page, base: str) -> None:
    _open(page, base, "ridge")
    _reload(page)


def back_then_reload(page: Page, base: str) -> None:
    _open(page, base, "falcon", "ridge")
    _back(page)
    _reload(page)


def back(page: Page, base: str) -> None:
    _open(page, base, "ridge", "falcon")
    _back(page)


def link_to_visited(page: Page, base: str) -> None:
    _open(page, base, "ridge", "falcon")
    with page.expect_navigation():
        page.click("#to-ridge")


BOTH = {"on": "success", "off": "success"}
NEITHER = {"on": "failure", "off": "failure"}
UNSEEN = {"on": "failure", "off": "success"}
AGENTS = (
    # The run: the right article, then a reload of it (a 304 with the cache on).
    Agent("reload", 9301, reload_answer, BOTH),
    Agent("reload-wrong", 9301, reload_other, NEITHER),
    # Back to the right article, taken from the cache, then reloaded.
    Agent("back-reload", 9301, back_then_reload, BOTH),
    # Back to the right article and no more: with the cache on no request leaves the browser, and the
    # browser's own HAR records that entry with no Accept header, which the reference does not count
    # as a navigation; the last one is the article left. Without a cache, going back asks again.
    Agent("back", 9302, back, UNSEEN),
    # A link back to a visited article: from the cache with it on (no request, no navigation either).
    Agent("link-to-visited", 9302, link_to_visited, UNSEEN),
)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("kiwix")


@pytest.fixture(scope="module")
def kiwix(workdir: Path) -> Iterator[str]:
    with running_kiwix(build_zim(workdir / "zim" / f"{BOOK}.zim"), free_port()) as base:
        yield base


@pytest.fixture(scope="module")
def proxy(workdir: Path, kiwix: str) -> Iterator[ProxyProcess]:
    config = write_config(workdir / "sites.json", {"__WIKIPEDIA__": {"urls": [kiwix]}})
    running = start_proxy(workdir / "proxy", tasks=TASKS_FILE, config=config)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def runs(workdir: Path, kiwix: str, proxy: ProxyProcess) -> list[Judged]:
    return run_agents(proxy, AGENTS, kiwix, workdir, NAVIGATED, prefix="kiwix")


def test_live_verdicts_are_as_planned(runs: list[Judged]) -> None:
    assert [(run.label, run.live) for run in runs] == [(run.label, run.planned) for run in runs]


def test_a_reload_of_the_answer_page_is_the_page_the_browser_showed(runs: list[Judged]) -> None:
    """The issue's run: the wire said 304, our network.har says 200 (the browser's HAR too) and keeps
    the 304 beside it."""
    reload_on = next(run for run in runs if run.label == "kiwix-reload-on")
    ours = _entries(reload_on.proxy_dir / "network.har", "/Falcon_Crag")
    theirs = _entries(reload_on.browser_har, "/Falcon_Crag")  # type: ignore[arg-type]
    assert [e["response"]["status"] for e in ours] == [200, 200] == [e["response"]["status"] for e in theirs]
    assert [e["response"].get("_wire") for e in ours] == [None, {"status": 304, "statusText": "Not Modified"}]
    assert ours[1]["response"]["content"]["mimeType"].startswith("text/html")
    reload_off = next(run for run in runs if run.label == "kiwix-reload-off")
    assert [
        e["response"].get("_wire") for e in _entries(reload_off.proxy_dir / "network.har", "/Falcon_Crag")
    ] == [
        None,
        None,
    ]


def test_three_way_agreement_and_the_304s_met(
    runs: list[Judged], workdir: Path, kiwix: str, oracle_python: Path, official_dataset: Path
) -> None:
    dataset = oracle_dataset(official_dataset, TASKS_FILE, workdir / "oracle-dataset.json")
    config = write_config(workdir / "oracle-config.json", {"__WIKIPEDIA__": {"urls": [kiwix]}},
                          test_data_file=dataset)  # fmt: skip
    judge_three_ways(runs, oracle_python, config, workdir / "judged")
    met = assert_three_ways(runs, revalidated_at_least=1)
    # Each reload of an article revalidates it once; nothing else does (a month of freshness).
    assert met["on"] == sum(1 for agent in AGENTS if "reload" in agent.name)


def _entries(har: Path, suffix: str) -> list[dict[str, Any]]:
    entries = json.loads(har.read_text())["log"]["entries"]
    return [e for e in entries if e["request"]["url"].endswith(suffix)]
