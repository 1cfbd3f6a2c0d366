"""`report --html FILE` written away from the run directory, opened in a real Chromium.

The README's own example writes `--html report.html` in the current folder, not in the run: every
task link of the page must still open that attempt's verdict, each failing check must say why, the
templates must read as their intent template text, and no bar label may sit on its error bar.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest
from playwright.sync_api import sync_playwright

from tests.commands.test_report import artifacts
from tests.commands.test_report_attempts import HAR
from tests.site.harness import CHROMIUM, CHROMIUM_ARGS
from webarena_live.commands.cli import main
from webarena_live.evaluator import load_tasks, place_run

ANSWERS = {  # task: the answers of its attempts, oldest first
    1006: ([89.0], [39.95], [34.99]),  # the price of the cheapest backpack is 39.95
    1001: ([34.99],),  # the lamp's price: right
    1007: (None,),  # a navigate task with no navigation in the trace: its network check fails
}

LABELS_AND_WHISKERS = """() => [...document.querySelectorAll('.js-plotly-plot')].map(plot => {
    const bar = plot.data[0];
    return {tops: bar.y.map((y, i) => y + bar.error_y.array[i]),
            labels: plot.layout.annotations.map(a => ({x: a.x, y: a.y, text: a.text}))};
})"""


def _write(run: Path) -> None:
    for task_id, answers in ANSWERS.items():
        kind = "navigate" if task_id == 1007 else "retrieve"
        for index, data in enumerate(answers, start=1):
            answer = {"task_type": kind, "status": "SUCCESS", "retrieved_data": data}
            record = {"attempt": f"{task_id}-{index}", "session": f"agent-{index}"}
            files = {"agent_response.json": json.dumps(answer).encode(), "network.har": HAR,
                     "attempt.json": json.dumps(record).encode()}  # fmt: skip
            place_run(run / str(task_id), files)


def test_the_page_works_away_from_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "runs" / "today"
    _write(run)
    assert main(["evaluate", "--output-dir", str(run), "--tasks", "demo"]) == 0
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "pages").mkdir(parents=True)
    monkeypatch.chdir(elsewhere)  # relative paths, as a person types them
    assert main(["report", "../runs/today", "--tasks", "demo", "--html", "pages/report.html"]) == 0
    capsys.readouterr()
    page = elsewhere / "pages" / "report.html"
    monkeypatch.chdir(tmp_path)

    opened: dict[str, Any] = {}
    problems: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=list(CHROMIUM_ARGS))
        try:
            context = browser.new_context(viewport={"width": 1200, "height": 1600})
            context.route(re.compile(r"^(?!file:).*"), lambda route: route.abort())
            view = context.new_page()
            view.on("pageerror", lambda error: problems.append(str(error)))
            view.goto(page.as_uri())
            view.wait_for_function("document.querySelectorAll('.js-plotly-plot .main-svg').length >= 2")
            text = " ".join(view.inner_text("body").split())
            charts = view.evaluate(LABELS_AND_WHISKERS)
            links = view.eval_on_selector_all(
                "a[href$='eval_result.json']", "links => links.map(a => [a.textContent, a.href])"
            )
            view.screenshot(path=str(artifacts(tmp_path) / "report-away.png"), full_page=True)
            for label, href in links:  # each link opened in the browser: the verdict of that attempt
                view.goto(href)
                opened[f"{label} {href}"] = json.loads(view.inner_text("body"))
        finally:
            browser.close()
    assert not problems, problems

    linked = {unquote(urlsplit(href).path) for _, href in links}
    folders = {str(run / ".attempts" / "1006" / n / "eval_result.json") for n in ("1", "2")}
    assert (
        folders | {str(run / "1006" / "eval_result.json"), str(run / "1007" / "eval_result.json")} <= linked
    )
    assert all(Path(path).is_file() for path in linked)
    assert opened and all(str(result["task_id"]) in label for label, result in opened.items()), list(opened)

    assert "Expected [39.95], got [89.0]" in text and "Expected [39.95], got [34.99]" in text
    assert "4 of 5 judged" not in text and "2 of 5 judged attempts of 3 tasks succeed" in text
    demo = load_tasks("demo")
    for task_id in ANSWERS:
        assert demo[task_id].intent_template in text, task_id
    assert "lowest of" not in text  # three templates: the table lists all of them
    for chart in charts:  # each `success/attempts` label above its whisker
        assert len(chart["labels"]) == len(chart["tops"]) > 0
        for top, label in zip(chart["tops"], chart["labels"], strict=True):
            assert label["y"] > top and re.fullmatch(r"\d+/\d+", label["text"]), (top, label)
