"""`webarena-live report` checked against an independent computation.

Run directories over the 812 official tasks are generated with known outcomes (success, failure,
error, an `UNKNOWN_ERROR` answer, a site that never answered, missing); the figures `report --json`
prints are recomputed here from the plan, the intervals with statsmodels (Wilson) and the McNemar
p-value with statsmodels and scipy.
"""

from __future__ import annotations

import json
import os
import random
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import sync_playwright
from scipy.stats import binomtest
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.proportion import proportion_confint

from tests.site.harness import CHROMIUM, CHROMIUM_ARGS
from webarena_live.commands.cli import main
from webarena_live.evaluator import default_tasks_path, load_tasks, paired_difference, wilson_interval

OUTCOMES = ("success", "failure", "error", "unknown_error", "unanswered", "missing")
WEIGHTS = (45, 30, 5, 5, 5, 10)


def _write_run(root: Path, plan: dict[int, str], tasks: Any) -> None:
    for task_id, outcome in plan.items():
        if outcome == "missing":
            continue
        task = tasks[task_id]
        folder = root / str(task_id)
        folder.mkdir(parents=True)
        status = {"success": "success", "error": "error"}.get(outcome, "failure")
        evaluators = [{"evaluator_name": "AgentResponseEvaluator", "status": "success", "score": 1.0}]
        if status == "failure":
            failed = {"assertion_name": "missing_navigation_event", "status": "failure"}
            evaluators.append(
                {
                    "evaluator_name": "NetworkEventEvaluator",
                    "status": "failure",
                    "score": 0.0,
                    "assertions": [failed],
                }
            )
        result = {
            "task_id": task_id, "intent_template_id": task.intent_template_id, "sites": list(task.sites),
            "status": status, "score": 1.0 if status == "success" else 0.0, "evaluators_results": evaluators,
        }  # fmt: skip
        (folder / "eval_result.json").write_text(json.dumps(result))
        answer = {
            "task_type": task.task_type.value,
            "status": "UNKNOWN_ERROR" if outcome == "unknown_error" else "SUCCESS",
        }
        (folder / "agent_response.json").write_text(json.dumps(answer))
        status_code = 0 if outcome == "unanswered" else 200
        entry = {"request": {"method": "GET", "url": "http://x/"}, "response": {"status": status_code}}
        (folder / "network.har").write_text(json.dumps({"log": {"entries": [entry]}}))


def artifacts(tmp_path: Path) -> Path:
    """Where screenshots are kept: `$WEBARENA_TEST_ARTIFACTS`, else the test's own directory."""
    folder = Path(os.environ.get("WEBARENA_TEST_ARTIFACTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _report(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["report", *args, "--json"]) == 0
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    return document


def _expected(plan: dict[int, str], ids: list[int]) -> dict[str, Any]:
    judged = [i for i in ids if plan[i] != "missing"]
    success = sum(plan[i] == "success" for i in judged)
    low, high = proportion_confint(success, len(judged), alpha=0.05, method="wilson") if judged else (0, 1)
    return {
        "tasks": len(judged),
        "success": success,
        "errors": sum(plan[i] == "error" for i in judged),
        "environment": sum(plan[i] in ("unknown_error", "unanswered") for i in judged),
        "interval": [low, high],
    }


@pytest.fixture(scope="module")
def official(official_dataset: Path) -> Any:
    return load_tasks(official_dataset)


def test_figures_over_the_812_official_tasks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], official: Any, official_dataset: Path
) -> None:
    rng = random.Random(20261124)
    plan = {task_id: rng.choices(OUTCOMES, WEIGHTS)[0] for task_id in official}
    _write_run(tmp_path / "run", plan, official)
    document = _report(capsys, str(tmp_path / "run"), "--tasks", str(official_dataset))

    ids = sorted(official)
    expected = _expected(plan, ids)
    assert {k: document[k] for k in ("tasks", "success", "errors", "environment")} == {
        k: expected[k] for k in ("tasks", "success", "errors", "environment")
    }
    assert document["missing"] == sum(outcome == "missing" for outcome in plan.values())
    assert document["rate"] == pytest.approx(expected["success"] / expected["tasks"])
    assert document["interval"] == pytest.approx(expected["interval"], abs=1e-12)

    by_site: dict[str, list[int]] = defaultdict(list)
    by_action: dict[str, list[int]] = defaultdict(list)
    by_template: dict[str, list[int]] = defaultdict(list)
    for task_id in ids:
        task = official[task_id]
        for site in task.sites:  # a task of several sites counts under each
            by_site[str(site)].append(task_id)
        by_action[task.task_type.value.lower()].append(task_id)
        by_template[str(task.intent_template_id)].append(task_id)
    for key, groups in (("by_site", by_site), ("by_action", by_action), ("by_template", by_template)):
        for name, members in groups.items():
            want = _expected(plan, members)
            if not want["tasks"]:
                assert name not in document[key]
                continue
            got = document[key][name]
            assert (got["tasks"], got["success"], got["errors"]) == (
                want["tasks"],
                want["success"],
                want["errors"],
            )
            assert got["interval"] == pytest.approx(want["interval"], abs=1e-12), (key, name)
    assert sorted(document["by_action"]) == ["mutate", "navigate", "retrieve"]
    # The official hard subset, from the reference package beside the dataset file.
    hard_file = official_dataset.parent / "subsets" / "webarena-verified-hard.json"
    hard_ids = json.loads(hard_file.read_text())["task_ids"]
    want = _expected(plan, hard_ids)
    got = document["hard"]
    assert (got["tasks"], got["success"], got["errors"]) == (want["tasks"], want["success"], want["errors"])
    assert got["interval"] == pytest.approx(want["interval"], abs=1e-12)
    failing = {check["check"]: check["count"] for check in document["failing_checks"]}
    assert failing == {"NetworkEventEvaluator: missing_navigation_event": sum(
        plan[i] in ("failure", "unknown_error", "unanswered") for i in ids)}  # fmt: skip


def test_two_runs_compared_as_pairs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], official: Any, official_dataset: Path
) -> None:
    rng = random.Random(7)
    here = {task_id: rng.choices(("success", "failure"), (55, 45))[0] for task_id in official}
    there = {
        task_id: (o if rng.random() < 0.8 else rng.choice(("success", "failure")))
        for task_id, o in here.items()
    }
    _write_run(tmp_path / "a", here, official)
    _write_run(tmp_path / "b", there, official)
    vs = _report(capsys, str(tmp_path / "a"), "--vs", str(tmp_path / "b"), "--tasks", str(official_dataset))[
        "vs"
    ]
    only_here = sorted(i for i in official if here[i] == "success" and there[i] != "success")
    only_there = sorted(i for i in official if there[i] == "success" and here[i] != "success")
    assert vs["only_here"] == only_here and vs["only_there"] == only_there
    both = sum(here[i] == there[i] == "success" for i in official)
    table = [
        [both, len(only_here)],
        [len(only_there), len(official) - both - len(only_here) - len(only_there)],
    ]
    assert vs["p_value"] == pytest.approx(mcnemar(table, exact=True).pvalue, rel=1e-9)
    assert vs["p_value"] == pytest.approx(
        binomtest(len(only_here), len(only_here) + len(only_there)).pvalue, rel=1e-9
    )
    assert vs["difference"] == pytest.approx((len(only_here) - len(only_there)) / len(official))
    low, high = vs["interval"]
    assert low < vs["difference"] < high
    for site, row in vs["by_site"].items():
        members = [i for i in official if site in [str(s) for s in official[i].sites]]
        flips = (sum(here[i] == "success" and there[i] != "success" for i in members),
                 sum(there[i] == "success" and here[i] != "success" for i in members))  # fmt: skip
        assert (len(row["only_here"]), len(row["only_there"])) == flips, site
        assert row["p_value"] == pytest.approx(binomtest(flips[0], sum(flips)).pvalue if sum(flips) else 1.0)


def test_the_paired_interval_uses_wilsons_bounds_as_newcombe_does() -> None:
    """Newcombe's method 10, recomputed from statsmodels' Wilson bounds for a worked table."""
    both, only_here, only_there, neither = 12, 9, 2, 21
    n = both + only_here + only_there + neither
    difference, (low, high) = paired_difference(both, only_here, only_there, neither)
    p1, p2 = (both + only_here) / n, (both + only_there) / n
    l1, u1 = proportion_confint(both + only_here, n, method="wilson")
    l2, u2 = proportion_confint(both + only_there, n, method="wilson")
    phi = (both * neither - only_here * only_there) / (
        ((both + only_here) * (only_there + neither) * (both + only_there) * (only_here + neither)) ** 0.5
    )
    assert difference == pytest.approx(p1 - p2)
    assert low == pytest.approx(
        p1 - p2 - ((p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2) ** 0.5
    )
    assert high == pytest.approx(
        p1 - p2 + ((u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2) ** 0.5
    )
    assert wilson_interval(0, 0) == (0.0, 1.0)


def test_an_html_report_with_its_charts_and_no_network(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], official: Any, official_dataset: Path
) -> None:
    plan = {task_id: ("success" if task_id % 3 else "failure") for task_id in official}
    _write_run(tmp_path / "run", plan, official)
    page = tmp_path / "report.html"
    assert main(["report", str(tmp_path / "run"), "--tasks", str(official_dataset), "--html", str(page)]) == 0
    printed = capsys.readouterr().out
    assert "By site" in printed and "HTML report" in printed
    assert "<script src=" not in page.read_text()  # Plotly's JavaScript is in the page itself
    document = _report(capsys, str(tmp_path / "run"), "--tasks", str(official_dataset))

    # A real Chromium opens it with every network request refused: the charts draw, no console error,
    # and the figures the page carries are those of `report --json`.
    problems: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=list(CHROMIUM_ARGS))
        try:
            context = browser.new_context(viewport={"width": 1200, "height": 1600})
            context.route(re.compile(r"^(?!file:).*"), lambda route: route.abort())
            view = context.new_page()
            view.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
            view.on("pageerror", lambda error: problems.append(str(error)))
            view.goto(page.as_uri())
            view.wait_for_function("document.querySelectorAll('.js-plotly-plot .main-svg').length >= 2")
            shown = json.loads(view.inner_text("#report-data") or "{}")
            view.screenshot(path=str(artifacts(tmp_path) / "report.png"), full_page=True)
        finally:
            browser.close()
    assert not problems, problems
    assert {k: v for k, v in shown.items() if k != "directory"} == {
        k: v for k, v in document.items() if k != "directory"
    }


def test_the_demo_tasks_by_name_and_evaluate_lists_few_ids(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], official: Any, official_dataset: Path
) -> None:
    """`--tasks demo` names the embedded tasks (a pip user has no path for them); `evaluate` prints
    the first failed ids and counts the rest."""
    assert load_tasks("demo").checksum == load_tasks(default_tasks_path()).checksum
    plan = dict.fromkeys(sorted(official), "failure")
    _write_run(tmp_path / "run", plan, official)
    assert main(["evaluate", "--output-dir", str(tmp_path / "run"), "--tasks", str(official_dataset)]) == 0
    printed = capsys.readouterr().out
    flat = " ".join(printed.split())  # rich wraps long lines at the terminal's width
    listed = flat[flat.index("failed (") : flat.index(" more", flat.index("failed ("))]
    assert listed.count(",") == 19 and "… and" in listed, listed
    demo_run = tmp_path / "demo"
    _write_run(demo_run, dict.fromkeys(sorted(load_tasks("demo")), "success"), load_tasks("demo"))
    assert _report(capsys, str(demo_run), "--tasks", "demo")["success"] == 7
