"""The dashboard's run view during a live run: the figures of `webarena-live report`, as sessions finish.

A real `serve` with an output directory, sessions finished one after another while a real Chromium
keeps the dashboard open: the run view follows each finish, and what it shows equals what
`report --json` prints for the output directory. No console error; a screenshot is kept.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import requests
from playwright.sync_api import sync_playwright

from tests.site.harness import CHROMIUM, CHROMIUM_ARGS
from tests.support.serve_process import NAVIGATED, NAVIGATION, finish, shop, start_serve
from webarena_live.commands.cli import main
from webarena_live.evaluator import default_tasks_path

__all__ = ["shop"]  # a fixture

pytestmark = pytest.mark.timeout(180)

PRICE = {"task_type": "RETRIEVE", "status": "SUCCESS", "retrieved_data": [34.99]}
RUNS = {
    "v0": (1003, "/enamel-camp-mug.html", NAVIGATED),  # the cheapest mug's page: success
    "v1": (1007, "/", NAVIGATED),  # not the sorted search results: failure
    "v2": (1001, "/", PRICE),  # the lamp's price: success
}


def test_the_run_view_follows_the_finishes(
    tmp_path: Path, shop: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    served, control, _ = start_serve(tmp_path, shop, tmp_path / "state", "--output-dir", str(out))
    problems: list[str] = []
    shots = Path(os.environ.get("WEBARENA_TEST_ARTIFACTS") or tmp_path)
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=list(CHROMIUM_ARGS))
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda error: problems.append(str(error)))
            page.goto(f"{control}/")
            page.wait_for_selector('#run-overall[data-tasks="0"]', timeout=10_000)
            page.wait_for_selector("#live.on", timeout=10_000)
            for judged, (name, (task_id, path, answer)) in enumerate(RUNS.items(), start=1):
                body = {"task_id": task_id, "session": name}
                started = requests.post(f"{control}/sessions", json=body, timeout=30).json()
                requests.get(
                    f"{shop}{path}", proxies={"http": started["proxy"]}, headers=NAVIGATION, timeout=10
                )
                finish(control, name, answer)
                page.wait_for_selector(f'#run-overall[data-tasks="{judged}"]', timeout=10_000)
            page.wait_for_selector("#run-chart .main-svg", timeout=10_000)
            bars = page.eval_on_selector_all("#run-chart .bars .point", "points => points.length")
            assert bars == 1  # one site: the shop
            page.screenshot(path=str(shots / "run-view.png"), full_page=True)
            shown = {
                "overall": page.eval_on_selector(
                    "#run-overall", "e => [+e.dataset.success, +e.dataset.tasks]"
                ),
                "sites": page.eval_on_selector_all(
                    "#run-sites tbody tr",
                    "rows => rows.map(r => [r.dataset.name, +r.dataset.success, +r.dataset.tasks])",
                ),
                "actions": page.eval_on_selector_all(
                    "#run-actions tbody tr",
                    "rows => rows.map(r => [r.dataset.name, +r.dataset.success, +r.dataset.tasks])",
                ),
                "templates": page.eval_on_selector_all(
                    "#run-templates tbody tr", "rows => rows.map(r => [r.dataset.name, +r.dataset.success])"
                ),
                "text": page.inner_text("#run-overall"),
            }
            browser.close()
    finally:
        served.stop()
    assert not problems, problems
    assert main(["report", str(out), "--tasks", str(default_tasks_path()), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert (document["tasks"], document["success"], document["missing"]) == (3, 2, 4)
    assert shown["overall"] == [document["success"], document["tasks"]]
    assert shown["sites"] == [[n, r["success"], r["tasks"]] for n, r in document["by_site"].items()]
    assert shown["actions"] == [[n, r["success"], r["tasks"]] for n, r in document["by_action"].items()]
    assert sorted(shown["templates"]) == sorted([n, r["success"]] for n, r in document["by_template"].items())
    low, high = document["interval"]
    assert f"{low * 100:.1f}%-{high * 100:.1f}%" in shown["text"]
