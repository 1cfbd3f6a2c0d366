"""The pool, visible: the serve banner names its policy; the dashboard (real Chromium) lists each
session's replica and whether its verdict is exposed, the starts refused for want of a copy, each
replica's resets (when, after whom, how long), and a finished session's time as the server measured it;
every reset is logged. One `serve`, replicas of a real counter site (`tests/support/counter_replicas.py`).
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
import requests
from playwright.sync_api import sync_playwright

from tests.site.harness import CHROMIUM, CHROMIUM_ARGS, start_proxy
from tests.support.counter_replicas import DEMO_TASKS, MUTATE, READ, counter_config, counters

pytestmark = pytest.mark.timeout(300)

CHANGED = {"task_type": "MUTATE", "status": "SUCCESS", "retrieved_data": None}


def test_the_dashboard_and_the_log_show_replicas_refusals_resets_and_the_servers_times(
    tmp_path: Path,
) -> None:
    with counters(1, delay=0.4) as (replica,):
        config = counter_config(tmp_path / "sites.json", [replica])
        args = ["--isolation", "exclusive", "--confine", "--lease-timeout", "600"]
        proxy = start_proxy(tmp_path / "serve", tasks=DEMO_TASKS, config=config, extra_args=args)
        try:
            control = proxy.control_url
            writer = requests.post(
                f"{control}/sessions", json={"task_id": MUTATE, "session": "w"}, timeout=30
            )
            through = {"http": writer.json()["proxy"]}
            assert requests.post(f"{replica.url}/add", proxies=through, timeout=30).status_code == 200
            refused = requests.post(
                f"{control}/sessions", json={"task_id": READ, "session": "late"}, timeout=30
            )
            assert refused.status_code == 503
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                try:
                    page = browser.new_page(viewport={"width": 1400, "height": 900})
                    page.goto(f"{control}/")
                    page.wait_for_selector("#sessions tr[data-session='w']")
                    page.click("#sessions tr[data-session='w']")
                    time.sleep(1.2)  # the session runs a while as the page watches it
                    finish = requests.post(f"{control}/sessions/w/finish", json=CHANGED, timeout=60)
                    assert finish.status_code == 200
                    page.wait_for_function(
                        "document.querySelector('#session-time').textContent.includes('took')"
                    )
                    page.wait_for_function(  # the reset after w, listed once it is done
                        "[...document.querySelectorAll('#pool li')]"
                        ".some(li => li.textContent.includes('after w'))",
                        timeout=20_000,
                    )
                    time.sleep(0.5)  # the server's times replace the page's own
                    took = page.inner_text("#session-time")
                    row = page.locator("#sessions tr[data-session='w'] td").all_inner_texts()
                    refusals = page.text_content("#pool-refused") or ""  # folded: its text all the same
                    pool_items = page.locator("#pool li").all_inner_texts()
                    page.screenshot(path=str(tmp_path / "dashboard.png"), full_page=True)
                finally:
                    browser.close()
            view = requests.get(f"{control}/sessions/w", timeout=30).json()
            health = requests.get(f"{control}/health", timeout=30).json()["pool"]
        finally:
            proxy.stop()
        log = proxy.log_file.read_text()
    shown = float(re.search(r"took ([0-9.]+) s", took).group(1))  # type: ignore[union-attr]
    assert shown == pytest.approx(view["finished"] - view["started"], abs=0.051), (took, view)
    assert row[6] == f"__SHOPPING__ {replica.url}" and row[7] == "no", row
    assert "1 start refused for want of a copy" in refusals and "late (task 1001)" in refusals
    assert "replica 0 held by a mutating task (session w)" in refusals
    assert any("1 reset, last" in item and "after w" in item for item in pool_items), pool_items
    (reset,) = health["sites"]["__SHOPPING__"]["replicas"][0]["resets"]
    assert reset["after"] == "w" and reset["ok"] is True and reset["seconds"] >= 0.4
    assert [r["session"] for r in health["refused"]] == ["late"]
    assert re.search(r"replica 0 of __SHOPPING__ \(.*\) reset in [0-9.]+ s, after session w", log), log[
        -3000:
    ]
    banner = re.search(
        r"replicas +1 of 1 sites, --isolation exclusive, --confine on, --lease-timeout 600 s idle", log
    )
    assert banner, log[:3000]
