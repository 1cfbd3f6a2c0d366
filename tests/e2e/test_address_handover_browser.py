"""One Chromium, launched once with a session address as its proxy (Playwright's `proxy` option, as a
browser server launches it), does two tasks in a row under two session names: the address passes from
the first session to the second (`--session-ports P-P`) and the browser's connections kept open to the
proxy go with it (`ClientConnections.session_of`). Before, the second task's first page was answered
`410 Gone` by the finished first session and nothing of it was captured."""

from __future__ import annotations

from pathlib import Path

import pytest
import requests
from playwright.sync_api import sync_playwright

from tests.site.harness import CHROMIUM, CHROMIUM_ARGS
from tests.support.serve_process import NAVIGATED, finish, serve_on_one_address, shop, trace_urls

__all__ = ["shop"]  # a fixture

pytestmark = pytest.mark.timeout(180)


def test_one_browser_two_sessions_one_address(tmp_path: Path, shop: str) -> None:
    served, control, _ = serve_on_one_address(tmp_path, shop, "--output-dir", str(tmp_path / "out"))
    try:
        first = requests.post(f"{control}/sessions", json={"task_id": 1003, "session": "one"}, timeout=30)
        address = first.json()["proxy"]
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=CHROMIUM, args=list(CHROMIUM_ARGS), proxy={"server": address}
            )
            page = browser.new_page()
            page.goto(f"{shop}/")
            page.get_by_role("link", name="Enamel Camp Mug").first.click()
            page.wait_for_url("**/enamel-camp-mug.html")
            assert finish(control, "one", NAVIGATED).json()["status"] == "success"

            body = {"task_id": 1003, "session": "two"}
            second = requests.post(f"{control}/sessions", json=body, timeout=30)
            assert second.json()["proxy"] == address, second.text  # the same address, a new name
            reply = page.goto(f"{shop}/")  # the same browser, its connections to the proxy kept
            assert reply is not None and reply.status == 200, reply.status if reply else None
            page.get_by_role("link", name="Enamel Camp Mug").first.click()
            page.wait_for_url("**/enamel-camp-mug.html")
            browser.close()
        assert f"{shop}/enamel-camp-mug.html" in trace_urls(control, "two")
        assert "late_events" not in requests.get(f"{control}/sessions/one", timeout=10).json()
        assert finish(control, "two", NAVIGATED).json()["status"] == "success"
    finally:
        served.stop()
