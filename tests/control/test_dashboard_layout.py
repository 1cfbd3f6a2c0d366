"""The dashboard with forty sessions, in a real Chromium: everything in its card, each intent read
whole (wrapped in its column, never cut), the session shown in view, the event that satisfies an
evaluator marked, the run's times.

A screenshot is kept (`$WEBARENA_TEST_ARTIFACTS`, else the test's directory) and was looked at.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import requests
from playwright.sync_api import sync_playwright

from tests.site.harness import CHROMIUM, CHROMIUM_ARGS
from tests.support.serve_process import NAVIGATED, NAVIGATION, finish, shop, start_serve

__all__ = ["shop"]  # a fixture

pytestmark = pytest.mark.timeout(180)

SESSIONS = 40


def test_forty_sessions_fit_and_the_shown_one_stays_in_view(tmp_path: Path, shop: str) -> None:
    served, control, _ = start_serve(tmp_path, shop, tmp_path / "state")
    shots = Path(os.environ.get("WEBARENA_TEST_ARTIFACTS") or tmp_path)
    try:
        for i in range(SESSIONS):
            name = f"agent-{i:02d}"
            # The last (shown) session's one event satisfies its task's network evaluator.
            body = {"task_id": 1003 if i % 2 == 0 or i == SESSIONS - 1 else 1007, "session": name}
            proxy = requests.post(f"{control}/sessions", json=body, timeout=30).json()["proxy"]
            requests.get(
                f"{shop}/enamel-camp-mug.html", proxies={"http": proxy}, headers=NAVIGATION, timeout=10
            )
            if i < SESSIONS - 1:
                finish(control, name, NAVIGATED)
        last = f"agent-{SESSIONS - 1:02d}"
        problems: list[str] = []
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=list(CHROMIUM_ARGS))
            page = browser.new_page(viewport={"width": 1366, "height": 768})
            page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
            page.goto(f"{control}/")
            page.wait_for_selector(f'#sessions tbody tr[data-session="{last}"]', timeout=10_000)
            # Every cell fits its column (nothing cut), the table fits its card, an intent is read whole.
            cut = page.eval_on_selector_all(
                "#sessions tbody td:nth-child(6)",
                "cells => cells.filter(c => c.scrollWidth > c.clientWidth).length",
            )
            assert cut == 0
            card = page.eval_on_selector("#sessions-panel", "e => e.getBoundingClientRect().right")
            table = page.eval_on_selector("#sessions", "e => e.getBoundingClientRect().right")
            assert table <= card
            intents = page.eval_on_selector_all(
                "#sessions tbody td.intent",
                "cells => cells.map(c => [c.innerText, c.title, c.scrollWidth <= c.clientWidth])",
            )
            assert all(text == title and fits for text, title, fits in intents), intents[:3]
            title = page.get_attribute(f'#sessions tbody tr[data-session="{last}"] td:nth-child(4)', "title")
            assert title == "Go to the product page of the cheapest mug in the shop."
            states = page.eval_on_selector_all(  # the short columns are not cut either
                "#sessions tbody td:nth-child(2), #sessions tbody td:nth-child(3)",
                "cells => cells.filter(c => c.scrollWidth > c.clientWidth).map(c => c.innerText)",
            )
            assert states == [], states
            # The last session, far down the list: shown beside it, in view.
            page.locator(f'#sessions tbody tr[data-session="{last}"]').scroll_into_view_if_needed()
            page.click(f'#sessions tbody tr[data-session="{last}"]')
            page.wait_for_selector('#events tbody tr[data-index="0"]', timeout=10_000)
            box = page.eval_on_selector("#session-panel", "e => e.getBoundingClientRect().toJSON()")
            assert 0 <= box["top"] < 768 and box["height"] > 100, box
            assert page.inner_text("#session-time").startswith("started ")
            page.wait_for_selector('#events tbody tr.satisfies[data-index="0"]', timeout=10_000)
            page.screenshot(path=str(shots / "dashboard-forty-sessions.png"))
            browser.close()
        assert not problems, problems
    finally:
        served.stop()
