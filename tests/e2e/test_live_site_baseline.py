"""The yardstick for the live tests: the test site, its task file and the
scripted agents, judged by the oracle alone, without our proxy.

Chromium browses the site directly while Playwright records the HAR (the way
WebArena-Verified's own harness records traces); the oracle must then give
exactly the verdicts the live tests expect from the proxy. When this passes
and a live test fails, the fault is in the proxy, not in the test material.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from tests.site import agents
from tests.site.harness import (
    CHROMIUM,
    CHROMIUM_ARGS,
    TASKS_FILE,
    oracle_dataset,
    oracle_verdicts,
    write_config,
)
from tests.site.server import RunningSite, run_site

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningSite]:
    with run_site(tmp_path_factory.mktemp("baseline-site")) as running:
        yield running


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=list(CHROMIUM_ARGS))
        yield chromium
        chromium.close()


def official_names(response: dict[str, Any]) -> dict[str, Any]:
    """The oracle only reads the dataset's field names; the agents also use the seed's."""
    return {
        "task_type": str(response.get("task_type") or response["action"]).lower(),
        "status": str(response["status"]).upper(),
        "retrieved_data": response.get("retrieved_data", response.get("results")),
    }


def record(browser: Browser, out: Path, task_id: int, agent: Callable[[Page], dict[str, Any]]) -> None:
    task_dir = out / str(task_id)
    task_dir.mkdir(parents=True)
    context = browser.new_context(record_har_path=str(task_dir / "network.har"), record_har_content="embed")
    try:
        response = agent(context.new_page())
    finally:
        context.close()  # writes the HAR
    (task_dir / "agent_response.json").write_text(json.dumps(official_names(response)))


def test_oracle_judges_the_scripted_agents_as_the_live_tests_expect(
    site: RunningSite, browser: Browser, tmp_path: Path, oracle_python: Path, official_dataset: Path
) -> None:
    shop, forum = site.shop_http, site.forum_http
    passing = tmp_path / "passing"
    record(browser, passing, 9001, lambda page: agents.open_lantern_page(page, shop))
    record(browser, passing, 9002, lambda page: agents.send_contact_message(page, shop))
    record(browser, passing, 9003, lambda page: agents.review_lantern(page, shop))
    record(browser, passing, 9004, lambda page: agents.add_lanterns_to_cart(page, shop))
    record(browser, passing, 9005, lambda page: agents.read_price_and_release(page, shop))
    record(browser, passing, 9006, lambda page: agents.read_stock(page, shop))
    record(browser, passing, 9007, lambda page: agents.wish_for_lantern(page, shop))
    record(browser, passing, 9008, lambda page: agents.open_forum_post(page, forum))
    record(browser, passing, 9009, lambda page: agents.search_for_lantern(page, shop))
    record(browser, passing, 9010, lambda page: agents.read_kettle_stock(page, shop))
    failing = tmp_path / "failing"
    record(browser, failing, 9001, lambda page: agents.open_lantern_page(page, shop, stop_short=True))
    record(browser, failing, 9003, lambda page: agents.review_lantern(page, shop, title="Too dim"))
    record(browser, failing, 9009, lambda page: agents.search_for_lantern(page, shop, query="lantern"))
    record(browser, failing, 9010, lambda page: agents.read_kettle_stock(page, shop, also_wish=True))

    dataset = oracle_dataset(official_dataset, TASKS_FILE, tmp_path / "dataset.json")
    config = write_config(tmp_path / "config.json", site.site_map(), test_data_file=dataset)
    assert {
        k: v["status"] for k, v in oracle_verdicts(oracle_python, passing, config).items()
    } == dict.fromkeys(range(9001, 9011), "success")
    assert {k: v["status"] for k, v in oracle_verdicts(oracle_python, failing, config).items()} == {
        9001: "failure",
        9003: "failure",
        9009: "failure",
        9010: "failure",
    }
