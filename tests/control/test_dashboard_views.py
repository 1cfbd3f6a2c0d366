"""The dashboard of `serve --workers 2` in a real Chromium, at three moments of a run: before any
verdict, while two sessions run (one per worker), and after a failed finish.

Before a verdict the run view says there is none (no "0 of 0 … 0.0% [0.0%-100.0%]"); the workers strip
shows each worker's state, sessions and restarts as `/health` lists them; intents are read whole; a
finished session's unmatched network check says "not matched", not "not yet". A screenshot of each
moment is kept (`$WEBARENA_TEST_ARTIFACTS`, else the test's directory) and was looked at.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import requests
from playwright.sync_api import Page, sync_playwright

from tests.site.harness import CHROMIUM, CHROMIUM_ARGS
from tests.support.serve_process import NAVIGATED, NAVIGATION, finish, shop, start_serve

__all__ = ["shop"]  # a fixture

pytestmark = pytest.mark.timeout(240)

SORTED = 'Show me the search results for "backpack", sorted by price from high to low.'
EVERY_WORKER_RUNS_ONE = (
    "() => [...document.querySelectorAll('#workers li')].every(i => /1 running/.test(i.textContent))"
)
NOT_MATCHED = (
    "() => document.querySelector('#progress tbody tr td:nth-child(3)').textContent === 'not matched'"
)


def _strip(page: Page) -> list[dict[str, str]]:
    return page.eval_on_selector_all(
        "#workers li", "items => items.map(i => ({state: i.dataset.state, text: i.textContent}))"
    )


def test_before_during_and_after_a_failed_finish(tmp_path: Path, shop: str) -> None:
    out = tmp_path / "out"
    served, control, _ = start_serve(
        tmp_path, shop, tmp_path / "state", "--workers", "2", "--output-dir", str(out)
    )
    shots = Path(os.environ.get("WEBARENA_TEST_ARTIFACTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    problems: list[str] = []
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=list(CHROMIUM_ARGS))
            page = browser.new_page(viewport={"width": 1366, "height": 900})
            page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda error: problems.append(str(error)))
            page.goto(f"{control}/")

            # Before any verdict: the run says so, nothing is drawn of no figures; two workers, up.
            page.wait_for_selector('#run-overall[data-attempts="0"]', timeout=15_000)
            page.wait_for_selector("#workers li", timeout=15_000)
            overall = page.inner_text("#run-overall")
            assert overall.startswith("No verdict yet") and "0 of 0" not in overall, overall
            assert "0.0%" not in page.inner_text("#run-panel") and page.is_hidden("#run-figures")
            assert [w["state"] for w in _strip(page)] == ["up", "up"]
            page.screenshot(path=str(shots / "dashboard-before-any-verdict.png"), full_page=True)

            # During the run: a session on each worker; the strip counts them.
            started = {}
            for name, task_id in (("mugs", 1003), ("sorted", 1007)):
                body = {"task_id": task_id, "session": name}
                started[name] = requests.post(f"{control}/sessions", json=body, timeout=30).json()
                requests.get(
                    f"{shop}/", proxies={"http": started[name]["proxy"]}, headers=NAVIGATION, timeout=10
                )
            assert {started["mugs"]["worker"], started["sorted"]["worker"]} == {0, 1}
            page.wait_for_function(EVERY_WORKER_RUNS_ONE, timeout=15_000)
            page.wait_for_selector('#sessions tbody tr[data-session="sorted"]', timeout=10_000)
            page.click('#sessions tbody tr[data-session="sorted"]')
            page.wait_for_selector("#progress tbody tr", timeout=10_000)
            assert page.inner_text("#progress tbody tr td:nth-child(3)") == "not yet"
            intent = page.locator('#sessions tbody tr[data-session="sorted"] td.intent')
            assert intent.inner_text() == SORTED  # read whole, wrapped in its column
            assert intent.evaluate("c => c.scrollWidth <= c.clientWidth && c.scrollHeight <= c.clientHeight")
            page.screenshot(path=str(shots / "dashboard-two-workers-running.png"), full_page=True)

            # After a failed finish: the unmatched check says so, the run view counts the failure.
            assert finish(control, "sorted", NAVIGATED).json()["status"] == "failure"
            page.wait_for_selector("#verdict:not([hidden])", timeout=10_000)
            page.wait_for_function(NOT_MATCHED, timeout=10_000)
            page.wait_for_selector('#run-overall[data-attempts="1"]', timeout=10_000)
            assert page.inner_text("#run-overall").startswith("0 of 1 judged tasks succeed")
            assert page.is_visible("#run-figures")
            templates = page.inner_text("#run-templates tbody")
            assert 'Show me the search results for "{{query}}"' in templates, templates
            page.screenshot(path=str(shots / "dashboard-after-a-failed-finish.png"), full_page=True)
            browser.close()
    finally:
        served.stop()
    assert not problems, problems
