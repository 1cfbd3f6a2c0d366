"""Redmine, a Rails application from Debian (the framework of GitLab and of the map site), with the
browser's cache on and off.

Rails sends every page with `Cache-Control: max-age=0, private, must-revalidate` and an ETag; Redmine's
activity pages keep theirs while nothing happens in the project, so a browser that comes back to one
(a link, a reload) revalidates it and gets `304 Not Modified` (most other pages carry a fresh CSRF
token and never do; docs/notes/live-findings.md, "Revalidation"). Scripted Chromium agents browse a
private Redmine instance (tests/redmine/app.py) through a real `webarena-live serve`, each run
with the cache on (the session's own address) and off (proxy credentials), and every run is judged
three ways (tests/support/threeway.py); the 304s met are printed and must not be zero with the cache on.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page

from tests.redmine.app import make_instance, running_redmine
from tests.site.harness import ProxyProcess, free_port, oracle_dataset, start_proxy, write_config
from tests.support.paths import TESTS
from tests.support.threeway import Agent, Judged, assert_three_ways, judge_three_ways, run_agents

TASKS_FILE = TESTS / "redmine" / "tasks.json"
NAVIGATED = {"task_type": "navigate", "status": "SUCCESS", "retrieved_data": None}

pytestmark = pytest.mark.timeout(600)


def _menu(page: Page, item: str) -> None:
    with page.expect_navigation():
        page.click(f"#main-menu a.{item}")


def activity_again(page: Page, base: str) -> None:
    """Overview -> Activity -> Overview -> Activity: the second visit revalidates the page (304)."""
    page.goto(f"{base}/projects/demo")
    for item in ("activity", "overview", "activity"):
        _menu(page, item)


def activity_reloaded(page: Page, base: str) -> None:
    page.goto(f"{base}/projects/demo")
    _menu(page, "activity")
    page.reload()


def activity_then_overview(page: Page, base: str) -> None:
    """Ends on the overview: the wrong page."""
    activity_again(page, base)
    _menu(page, "overview")


def back_to_activity(page: Page, base: str) -> None:
    """Activity -> Overview -> back: with the cache on the browser shows the activity page from its
    cache without a request (and its HAR holds no navigation to it); without a cache it asks again."""
    page.goto(f"{base}/projects/demo/activity")
    _menu(page, "overview")
    page.go_back()
    page.wait_for_selector("#main-menu a.activity.selected")


AGENTS = (
    Agent("activity-again", 9401, activity_again, {"on": "success", "off": "success"}),
    Agent("activity-reloaded", 9401, activity_reloaded, {"on": "success", "off": "success"}),
    Agent("overview", 9401, activity_then_overview, {"on": "failure", "off": "failure"}),
    Agent("back", 9401, back_to_activity, {"on": "failure", "off": "success"}),
)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("redmine")


@pytest.fixture(scope="module")
def redmine(workdir: Path) -> Iterator[str]:
    with running_redmine(make_instance(workdir / "instance"), free_port()) as base:
        yield base


@pytest.fixture(scope="module")
def proxy(workdir: Path, redmine: str) -> Iterator[ProxyProcess]:
    config = write_config(workdir / "sites.json", {"__GITLAB__": {"urls": [redmine]}})
    running = start_proxy(workdir / "proxy", tasks=TASKS_FILE, config=config)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def runs(workdir: Path, redmine: str, proxy: ProxyProcess) -> list[Judged]:
    return run_agents(proxy, AGENTS, redmine, workdir, NAVIGATED, prefix="redmine")


def test_live_verdicts_are_as_planned(runs: list[Judged]) -> None:
    assert [(run.label, run.live) for run in runs] == [(run.label, run.planned) for run in runs]


def test_a_revisited_activity_page_is_the_page_the_browser_showed(runs: list[Judged]) -> None:
    again = next(run for run in runs if run.label == "redmine-activity-again-on")
    entries = json.loads((again.proxy_dir / "network.har").read_text())["log"]["entries"]
    visits = [e["response"] for e in entries if e["request"]["url"].endswith("/projects/demo/activity")]
    assert [(visit["status"], visit.get("_wire", {}).get("status")) for visit in visits] == [
        (200, None),
        (200, 304),
    ]


def test_three_way_agreement_and_the_304s_met(
    runs: list[Judged], workdir: Path, redmine: str, oracle_python: Path, official_dataset: Path
) -> None:
    dataset = oracle_dataset(official_dataset, TASKS_FILE, workdir / "oracle-dataset.json")
    config = write_config(
        workdir / "oracle-config.json", {"__GITLAB__": {"urls": [redmine]}}, test_data_file=dataset
    )
    judge_three_ways(runs, oracle_python, config, workdir / "judged")
    met = assert_three_ways(runs, revalidated_at_least=3)
    print(f"Redmine: {met['on']} revalidations answered 304 with the cache on")
