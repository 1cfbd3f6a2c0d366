"""Every attempt counts: `report` gives the figures per attempt and per task, `evaluate` judges the
earlier attempts kept aside, and the words say what the figures mean.

The run directories are written by the evaluator's own writer (`place_run`, which moves an earlier
attempt of a task aside to `.attempts/<task_id>/<n>/`, as the proxy's finish does); the figures are
recomputed here from the plan, the intervals with statsmodels (Wilson).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from statsmodels.stats.proportion import proportion_confint

from webarena_live.commands.cli import main
from webarena_live.evaluator import ATTEMPTS_DIR, load_tasks, place_run

DEMO = load_tasks("demo")
HAR = json.dumps({"log": {"entries": [
    {"request": {"method": "GET", "url": "http://127.0.0.1:9/", "headers": []}, "response": {"status": 200}}
]}}).encode()  # fmt: skip
"""A trace of one page view: what a retrieve task's answer is judged beside."""


def _result(task_id: int, status: str, reason: str = "") -> dict[str, Any]:
    task = DEMO[task_id]
    failed = [{"assertion_name": "retrieved_data_mismatch", "status": "failure", "assertion_msgs": [reason]}]
    won = status == "success"
    evaluator = {"evaluator_name": "AgentResponseEvaluator", "status": status, "score": float(won),
                 "assertions": [] if won else failed}  # fmt: skip
    return {
        "task_id": task_id, "intent_template_id": task.intent_template_id, "sites": list(task.sites),
        "status": status,
        "score": float(status == "success"), "evaluators_results": [evaluator],
    }  # fmt: skip


def _attempt(run: Path, task_id: int, status: str, index: int, reason: str = "wrong") -> None:
    """One attempt's files, written as a finish writes them (an earlier attempt moved aside first)."""
    record = {
        "attempt": f"a{task_id}-{index}",
        "session": f"s{index}",
        "task_id": task_id,
        "started": f"2026-01-01T00:00:{index:02d}Z",
        "finished": f"2026-01-01T00:01:{index:02d}Z",
    }
    place_run(run / str(task_id), {
        "attempt.json": json.dumps(record).encode(),
        "agent_response.json": b'{"task_type": "retrieve", "status": "SUCCESS", "retrieved_data": [1]}',
        "network.har": HAR,
        "eval_result.json": json.dumps(_result(task_id, status, reason)).encode(),
    })  # fmt: skip


def _report(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["report", *args, "--json"]) == 0
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    return document


def _wilson(success: int, trials: int) -> list[float]:
    return list(proportion_confint(success, trials, alpha=0.05, method="wilson"))


def test_figures_per_attempt_and_per_task(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rng = random.Random(31)
    plan = {task_id: [rng.random() < 0.5 for _ in range(rng.randint(1, 6))] for task_id in DEMO}
    run = tmp_path / "run"
    for task_id, outcomes in plan.items():
        for index, won in enumerate(outcomes, start=1):
            _attempt(run, task_id, "success" if won else "failure", index)
    document = _report(capsys, str(run), "--tasks", "demo")

    every = [won for outcomes in plan.values() for won in outcomes]
    assert (document["tasks"], document["attempts"], document["success"]) == (
        len(plan),
        len(every),
        sum(every),
    )
    assert document["rate"] == pytest.approx(sum(every) / len(every))
    assert document["interval"] == pytest.approx(_wilson(sum(every), len(every)), abs=1e-12)
    tasks = document["per_task"]
    for name, met in (("any", [any(o) for o in plan.values()]), ("all", [all(o) for o in plan.values()]),
                      ("last", [o[-1] for o in plan.values()])):  # fmt: skip
        assert (tasks[name]["tasks"], tasks[name]["success"]) == (len(plan), sum(met)), name
        assert tasks[name]["interval"] == pytest.approx(_wilson(sum(met), len(plan)), abs=1e-12), name
    assert tasks["mean"] == pytest.approx(sum(sum(o) / len(o) for o in plan.values()) / len(plan))
    for task_id, outcomes in plan.items():  # each template is one task here
        row = document["by_template"][str(DEMO[task_id].intent_template_id)]
        assert (row["attempts"], row["success"]) == (len(outcomes), sum(outcomes))
        listed = document["attempts_by_task"][str(task_id)]
        assert [a["status"] == "success" for a in listed] == outcomes
        assert [a["folder"] for a in listed] == [
            *(f"{ATTEMPTS_DIR}/{task_id}/{n}" for n in range(1, len(outcomes))),
            str(task_id),
        ]
        assert [a["session"] for a in listed] == [f"s{n}" for n in range(1, len(outcomes) + 1)]
    assert document["templates"][str(DEMO[1006].intent_template_id)] == DEMO[1006].intent_template


def test_one_attempt_per_task_reads_as_before(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    for task_id in DEMO:
        _attempt(run, task_id, "success" if task_id % 2 else "failure", 1)
    document = _report(capsys, str(run), "--tasks", "demo")
    assert document["attempts"] == document["tasks"] == 7 and document["success"] == 4
    for name in ("any", "all", "last"):
        assert document["per_task"][name]["success"] == 4
    assert main(["report", str(run), "--tasks", "demo"]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert "4 of 7 judged tasks succeed: 57.1% [25.0-84.2]" in printed
    assert "By intent template " in printed and "lowest of" not in printed  # 7 templates: all of them


def test_evaluate_judges_the_earlier_attempts_and_report_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three attempts of demo task 1006 (the price of the cheapest backpack), answered right once:
    `evaluate` judges each where it lies, `report` counts three attempts and says why two failed."""
    run = tmp_path / "run"
    for index, price in enumerate((89.0, 39.95, 34.99), start=1):
        answer = {"task_type": "retrieve", "status": "SUCCESS", "retrieved_data": [price]}
        place_run(run / "1006", {"agent_response.json": json.dumps(answer).encode(),
                                 "network.har": HAR,
                                 "attempt.json": json.dumps({"attempt": f"x{index}"}).encode()})  # fmt: skip
    assert main(["evaluate", "--output-dir", str(run), "--tasks", "demo"]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert "earlier attempts: 2 judged (1 success, 1 failure)" in printed
    folders = (run / ATTEMPTS_DIR / "1006" / "1", run / ATTEMPTS_DIR / "1006" / "2", run / "1006")
    verdicts = [json.loads((f / "eval_result.json").read_text())["status"] for f in folders]
    assert verdicts == ["failure", "success", "failure"]

    document = _report(capsys, str(run), "--tasks", "demo")
    assert (document["attempts"], document["success"], document["tasks"]) == (3, 1, 1)
    assert document["per_task"]["any"]["success"] == 1 and document["per_task"]["last"]["success"] == 0
    (check,) = document["failing_checks"]
    assert check["count"] == 2 and {r["reason"].rsplit("; ", 1)[-1] for r in check["reasons"]} == {
        "Expected [39.95], got [89.0]", "Expected [39.95], got [34.99]"
    }  # fmt: skip
    monkeypatch.setenv("COLUMNS", "200")  # a row of the tables on one line
    assert main(["report", str(run), "--tasks", "demo"]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert "1 of 3 judged attempts of 1 tasks succeed: 33.3%" in printed
    assert "Expected [39.95], got [89.0]" in printed
    assert "What is the price of the cheapest {{item}}" in printed
