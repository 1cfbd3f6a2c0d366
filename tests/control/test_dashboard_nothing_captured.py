"""The dashboard's session view says what the proxy saw of a session that captured nothing, in the words
its finish answers with `409 no_events` (`runs/uncaptured.py`), in a real Chromium on `serve`'s page."""

from __future__ import annotations

import http.client
from pathlib import Path

import pytest
import requests
from playwright.sync_api import sync_playwright

from tests.site.harness import CHROMIUM, CHROMIUM_ARGS
from tests.support.serve_process import NAVIGATED, shop, start_serve

__all__ = ["shop"]  # a fixture

pytestmark = pytest.mark.timeout(180)


def test_the_session_view_says_what_the_finish_would(tmp_path: Path, shop: str) -> None:
    served, control, _ = start_serve(tmp_path, shop, tmp_path / "state")
    try:
        started = requests.post(f"{control}/sessions", json={"task_id": 1003, "session": "quiet"}, timeout=30)
        host, port = started.json()["proxy"].removeprefix("http://").rsplit(":", 1)
        browser_side = http.client.HTTPConnection(host, int(port), timeout=30)  # only a service's request
        browser_side.request("GET", "http://clients2.google.com/generate_204")
        browser_side.getresponse().read()
        browser_side.close()
        refused = requests.post(f"{control}/sessions/quiet/finish", json=NAVIGATED, timeout=30)
        assert (refused.status_code, refused.json()["error"]) == (409, "no_events"), refused.text
        said = refused.json()["detail"]
        assert "only 1 request of the browser's own services (clients2.google.com)" in said, said
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=list(CHROMIUM_ARGS))
            page = browser.new_page()
            page.goto(f"{control}/")
            page.click('#sessions tbody tr[data-session="quiet"]', timeout=15_000)
            page.wait_for_selector("#nothing-captured:not([hidden])", timeout=15_000)
            assert page.inner_text("#nothing-captured") == said
            browser.close()
    finally:
        served.stop()
