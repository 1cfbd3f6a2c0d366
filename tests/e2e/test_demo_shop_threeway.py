"""The demo shop with the browser's cache on and off, every run judged three ways.

The product's own scripted agent (`webarena_live.demo.agent.ATTEMPTS`: the seven demo tasks, two wrong
on purpose) and three agents that go back to visited pages, forward and reload, drive Debian's
Chromium through a real `webarena-live serve`: once through each session's own address (the cache on,
as the README recommends) and once with proxy credentials (Playwright turns the cache off). Each run
is judged live, by the reference on our network.har and by the reference on Playwright's own HAR of
the run (tests/support/threeway.py). The shop sends no validators with its pages (no ETag, no
Last-Modified), so nothing is revalidated here: a page the browser goes back to comes from its cache
without a request, and a reload fetches it whole. The 304s are Kiwix's and DokuWiki's tests' to meet.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page

from tests.site.harness import ProxyProcess, oracle_dataset, start_proxy, write_config
from tests.support.threeway import Agent, Judged, assert_three_ways, judge_three_ways, run_agents
from webarena_live.demo import site as demo_site
from webarena_live.demo.agent import ATTEMPTS, TIMEOUT_MS, open_cheapest_mug
from webarena_live.evaluator import default_tasks_path

pytestmark = pytest.mark.timeout(300)

NAVIGATED = {"task_type": "navigate", "status": "SUCCESS", "retrieved_data": None}


def _settled(page: Page) -> None:
    page.wait_for_load_state("load", timeout=TIMEOUT_MS)


def mug_then_back(page: Page, base: str) -> None:
    """The right product page, then back to the search results, and stops there."""
    open_cheapest_mug(page, base)
    page.go_back()
    _settled(page)


def mug_back_and_forward(page: Page, base: str) -> None:
    """Back to the results and forward again to the right product page."""
    open_cheapest_mug(page, base)
    page.go_back()
    _settled(page)
    page.go_forward()
    _settled(page)


def mug_then_reload(page: Page, base: str) -> None:
    open_cheapest_mug(page, base)
    page.reload()
    _settled(page)


def _planned(wrong: bool) -> dict[str, str]:
    verdict = "failure" if wrong else "success"
    return {"on": verdict, "off": verdict}


AGENTS = (
    *(Agent(f"demo-{a.task_id}", a.task_id, a.act, _planned(a.fails_on_purpose)) for a in ATTEMPTS),
    # Back from the cache with it on: no request, so the last navigation is still the product page, for
    # the proxy and for the reference on the browser's HAR alike (the browser records that entry
    # without an Accept header, which the reference does not count as a navigation). With the cache
    # off the results page is asked for again, and is the page left.
    Agent("back", 1003, mug_then_back, {"on": "success", "off": "failure"}),
    Agent("back-forward", 1003, mug_back_and_forward, _planned(False)),
    Agent("reload", 1003, mug_then_reload, _planned(False)),
)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("demo-threeway")


@pytest.fixture(scope="module")
def shop() -> Iterator[str]:
    server = demo_site.serve("127.0.0.1", 0)
    yield server.url
    server.shutdown()


@pytest.fixture(scope="module")
def proxy(workdir: Path, shop: str) -> Iterator[ProxyProcess]:
    config = write_config(workdir / "sites.json", {"__SHOPPING__": {"urls": [shop]}})
    running = start_proxy(workdir / "proxy", tasks=default_tasks_path(), config=config)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def runs(workdir: Path, shop: str, proxy: ProxyProcess) -> list[Judged]:
    return run_agents(proxy, AGENTS, shop, workdir, NAVIGATED, prefix="shop")


def test_live_verdicts_are_as_planned(runs: list[Judged]) -> None:
    assert [(run.label, run.live) for run in runs] == [(run.label, run.planned) for run in runs]


def test_three_way_agreement(
    runs: list[Judged], workdir: Path, shop: str, oracle_python: Path, official_dataset: Path
) -> None:
    dataset = oracle_dataset(official_dataset, default_tasks_path(), workdir / "oracle-dataset.json")
    config = write_config(workdir / "oracle-config.json", {"__SHOPPING__": {"urls": [shop]}},
                          test_data_file=dataset)  # fmt: skip
    judge_three_ways(runs, oracle_python, config, workdir / "judged")
    met = assert_three_ways(runs)
    assert met == {"on": 0, "off": 0}  # no validators, nothing revalidated
