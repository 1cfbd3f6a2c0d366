"""The dashboard's session table at 1400 px, in a real Chromium: it uses the page's width (all of it
with no session shown, the larger share beside one), shows BrowserGym-style names whole (they differ
only at their end), wraps intents by words (never inside one), and shows an abandoned session as such,
not as `running`.

A screenshot is kept (`$WEBARENA_TEST_ARTIFACTS`, else the test's directory).
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

NAMES = [f"wa_live-20261127-172204-{task}-0" for task in (1001, 1003, 1004, 1005, 1006, 1007)]
WORDS_CUT = """cells => cells.map(cell => {
  // Each word of the intent on one line: a word whose range spans two line boxes was broken inside.
  const text = cell.firstChild; let cut = 0, at = 0;
  for (const word of cell.textContent.split(" ")) {
    const range = document.createRange(); range.setStart(text, at); range.setEnd(text, at + word.length);
    const tops = new Set([...range.getClientRects()].map(r => Math.round(r.top)));
    if (tops.size > 1) cut += 1;
    at += word.length + 1;
  }
  return cut;
})"""


def test_the_session_table_uses_the_width_and_shows_names_whole(tmp_path: Path, shop: str) -> None:
    served, control, _ = start_serve(tmp_path, shop, tmp_path / "state")
    shots = Path(os.environ.get("WEBARENA_TEST_ARTIFACTS") or tmp_path)
    try:
        proxies = {}
        for name in NAMES:
            task = int(name.split("-")[3])
            started = requests.post(
                f"{control}/sessions", json={"task_id": task, "session": name}, timeout=30
            )
            proxies[name] = started.json()["proxy"]
        requests.get(f"{shop}/enamel-camp-mug.html", proxies={"http": proxies[NAMES[1]]}, headers=NAVIGATION,
                     timeout=10)  # fmt: skip
        assert finish(control, NAMES[1], NAVIGATED).status_code == 200
        abandoned = requests.post(
            f"{control}/sessions/{NAMES[2]}/abandon", json={"reason": "closed"}, timeout=30
        )
        assert abandoned.status_code == 200, abandoned.text
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=list(CHROMIUM_ARGS))
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(f"{control}/")
            page.wait_for_selector(f'#sessions tbody tr[data-session="{NAMES[-1]}"]', timeout=10_000)
            main = page.eval_on_selector("main", "e => e.clientWidth")
            table = page.eval_on_selector("#sessions", "e => e.getBoundingClientRect().width")
            print(f"\nat 1400 px: main {main} px, the session table {table:.0f} px")
            assert table >= 0.9 * main, (table, main)  # no session shown: the whole width
            shown = page.eval_on_selector_all(
                "#sessions tbody td:nth-child(1)",
                "cells => cells.map(c => [c.innerText.replace(/\\s/g, ''), c.scrollWidth <= c.clientWidth])",
            )
            assert sorted(shown) == sorted([name, True] for name in NAMES), shown
            cut = page.eval_on_selector_all("#sessions tbody td.intent", WORDS_CUT)
            assert cut and not any(cut), cut
            states = dict(page.eval_on_selector_all(
                "#sessions tbody tr", "rows => rows.map(r => [r.dataset.session, r.cells[1].innerText])"
            ))  # fmt: skip
            assert states[NAMES[2]] == "abandoned" and states[NAMES[1]] == "finished", states
            assert states[NAMES[0]] == "running", states
            page.screenshot(path=str(shots / "dashboard-1400-sessions.png"))
            page.click(f'#sessions tbody tr[data-session="{NAMES[0]}"]')
            page.wait_for_selector("#session-panel:not([hidden])", timeout=10_000)
            beside = page.eval_on_selector("#sessions", "e => e.getBoundingClientRect().width")
            print(f"with a session shown: the session table {beside:.0f} px")
            assert beside >= 0.55 * main, (beside, main)  # the larger share beside the session shown
            cut = page.eval_on_selector_all("#sessions tbody td.intent", WORDS_CUT)
            assert not any(cut), cut
            page.screenshot(path=str(shots / "dashboard-1400-session-shown.png"))
            browser.close()
    finally:
        served.stop()
