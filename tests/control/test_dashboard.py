"""The dashboard at `/` in a real headless Chromium, against a real `webarena-live serve`.

A scripted agent browses the demo shop through the proxy (requests) on task
1007, whose network evaluator wants the search sorted by price, high to low.
The page must show each event within a second of its capture, the evaluator
turning satisfied by the right event, the verdict after the finish, and no
console error. The same holds behind `--control-token` once the token is typed.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.support.serve_process import finish, shop, start_serve
from webarena_live.client import proxy_url

__all__ = ["shop"]

sync_api = pytest.importorskip("playwright.sync_api")
CHROMIUM = "/usr/bin/chromium"
pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's chromium")

TOKEN = "dashboard-secret"
SESSION = "dash"
TASK = 1007

# The page stamps each event row with the wall-clock time it appeared (same clock as the proxy's), so
# the latency measured is capture → row, not the test's own polling interval.
WATCH_ROWS = """() => {
  window.rowSeen = {};
  const body = document.querySelector('#events tbody');
  new MutationObserver(() => {
    for (const row of body.rows) {
      if (!(row.dataset.index in window.rowSeen)) window.rowSeen[row.dataset.index] = Date.now();
    }
  }).observe(body, { childList: true });
}"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM)
        yield launched
        launched.close()


def artifacts(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("WEBARENA_TEST_ARTIFACTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def capture_time(event: dict[str, Any]) -> float:
    """When the proxy captured the event: its response's end, in epoch seconds."""
    return float(event["started"]) + event["duration_ms"] / 1000


@pytest.mark.parametrize("token", [None, TOKEN], ids=["open", "token"])
def test_dashboard_follows_a_session_live(browser: Any, shop: str, tmp_path: Path, token: str | None) -> None:
    extra = ("--control-token", token) if token else ()
    process, control, proxy = start_serve(tmp_path, shop, tmp_path / "state", *extra)
    auth = {"Authorization": f"Bearer {token}"} if token else {}
    problems: list[str] = []
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.on("console", lambda m: problems.append(f"console: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda error: problems.append(f"pageerror: {error}"))
    page.on("response", lambda r: problems.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)
    try:
        body = {"task_id": TASK, "session": SESSION}
        started = requests.post(f"{control}/sessions", json=body, headers=auth)
        assert started.ok, started.text
        page.goto(f"{control}/#{SESSION}")
        if token:
            page.wait_for_selector("#token-form:not([hidden])", timeout=5000)
            assert page.is_hidden("#session-panel") or page.locator("#events tbody tr").count() == 0
            page.fill("#token", token)
            page.click("#token-form button")
        page.wait_for_selector("#session-panel:not([hidden])", timeout=5000)
        page.wait_for_selector("#progress tbody tr", timeout=5000)
        page.wait_for_selector("#live.on", timeout=5000)
        page.evaluate(WATCH_ROWS)
        assert page.get_attribute("#progress tbody tr", "data-satisfied") == "false"

        agent = requests.Session()
        through = proxy_url(SESSION, port=int(proxy.rsplit(":", 1)[1]))
        agent.proxies = {"http": through, "https": through}
        pages = [
            f"{shop}/",
            f"{shop}/catalogsearch/result/?q=backpack",
            f"{shop}/catalogsearch/result/?q=backpack&product_list_order=price&product_list_dir=desc",
        ]
        for number, url in enumerate(pages):
            assert agent.get(url, headers={"Accept": "text/html"}).ok
            page.wait_for_selector(f'#events tbody tr[data-index="{number}"]', timeout=5000)
            if (
                number < len(pages) - 1
            ):  # the unsorted pages do not satisfy it (asked again at once when quiet)
                page.wait_for_timeout(400)
                assert page.get_attribute("#progress tbody tr", "data-satisfied") == "false"
        trace = requests.get(f"{control}/sessions/{SESSION}/trace", headers=auth).json()
        events = trace["events"] if isinstance(trace, dict) else trace
        seen = page.evaluate("() => window.rowSeen")
        latencies = [seen[str(e["index"])] / 1000 - capture_time(e) for e in events]
        print(f"\nevent-to-row latency ({'token' if token else 'open'}): "
              + ", ".join(f"{1000 * s:.0f} ms" for s in latencies))  # fmt: skip
        assert len(events) == len(pages) and all(latency < 1.0 for latency in latencies), latencies

        # The last page satisfies the evaluator, and the page names the event that did.
        satisfied = page.locator('#progress tbody tr[data-satisfied="true"]')
        satisfied.wait_for(timeout=3000)
        assert "by event 2" in satisfied.inner_text()

        page.uncheck('.filters input[value="navigation"]')
        assert page.locator("#events tbody tr:visible").count() == 0
        page.check('.filters input[value="navigation"]')
        assert page.locator("#events tbody tr:visible").count() == len(pages)

        answer = {"task_type": "navigate", "status": "SUCCESS", "retrieved_data": None}
        finished = finish(control, SESSION, answer, headers=auth)
        assert finished.ok and finished.json()["status"] == "success", finished.text
        page.wait_for_selector("#verdict:not([hidden])", timeout=3000)
        assert "Verdict: success" in page.inner_text("#verdict")
        page.wait_for_selector('#sessions tbody tr[data-session="dash"] td.success', timeout=3000)
        shot = artifacts(tmp_path) / f"dashboard-{'token' if token else 'open'}.png"
        page.screenshot(path=str(shot), full_page=True)
        print(f"screenshot: {shot}")
        assert not problems, problems
    finally:
        page.close()
        process.stop()


def test_dashboard_keeps_up_with_a_busy_run(browser: Any, shop: str, tmp_path: Path) -> None:
    """Hundreds of events a second: the page keeps the newest 1,000 rows (newest first) and says how many
    there were, keeps up (the last event shows soon after the agent's last answer), and a page
    opened afterwards starts at the events it keeps rather than reading the whole session."""
    process, control, proxy = start_serve(tmp_path, shop, tmp_path / "state")
    problems: list[str] = []
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.on("console", lambda m: problems.append(f"console: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda error: problems.append(f"pageerror: {error}"))
    page.on("response", lambda r: problems.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)
    streams: list[str] = []
    try:
        body = {"task_id": TASK, "session": SESSION}
        assert requests.post(f"{control}/sessions", json=body, timeout=10).ok
        page.goto(f"{control}/#{SESSION}")
        page.wait_for_selector("#live.on", timeout=5000)
        total = 1300
        through = proxy_url(SESSION, port=int(proxy.rsplit(":", 1)[1]))

        def browse(count: int) -> None:
            agent = requests.Session()
            agent.proxies = {"http": through, "https": through}
            for number in range(count):
                assert agent.get(f"{shop}/?n={number}", timeout=10).ok

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(browse, [total // 8 + (1 if worker < total % 8 else 0) for worker in range(8)]))
        # Keeping up: a few hundred milliseconds here (stream and draw intervals); generous for loaded CI.
        page.wait_for_selector(f'#events tbody tr:first-child[data-index="{total - 1}"]', timeout=5000)
        assert page.locator("#events tbody tr").count() == 1000
        assert page.inner_text("#event-count") == f"the last 1000 of {total}"
        indexes = page.eval_on_selector_all(
            "#events tbody tr", "rows => rows.map(r => Number(r.dataset.index))"
        )
        assert indexes == list(range(total - 1, total - 1001, -1))

        late = browser.new_page()
        late.on("request", lambda r: streams.append(r.url) if "/events" in r.url else None)
        late.goto(f"{control}/#{SESSION}")
        late.wait_for_selector(f'#events tbody tr:first-child[data-index="{total - 1}"]', timeout=5000)
        assert late.locator("#events tbody tr").count() == 1000
        assert any(url.endswith(f"/sessions/{SESSION}/events?tail=1000") for url in streams), streams
        late.close()
        assert not problems, problems
    finally:
        page.close()
        process.stop()
