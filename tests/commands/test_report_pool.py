"""The run report on a pooled run: the attempts finished after their lease ended are listed, exposed
verdicts and resets show in the HTML page as in the terminal, and an attempt whose evaluators failed
the same check twice counts once. Run directories written by the evaluator's own writer (`place_run`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.commands.test_report_attempts import HAR, _result
from webarena_live.commands.cli import main
from webarena_live.evaluator import POOL_FILE, place_run


def _twice_failed(task_id: int) -> dict[str, Any]:
    """A verdict whose two network evaluators failed the same check for the same reason."""
    result = _result(task_id, "failure", "wrong")
    check = {"assertion_name": "event_not_found", "status": "failure", "assertion_msgs": ["no POST seen"]}
    network = {"evaluator_name": "NetworkEventEvaluator", "status": "failure", "score": 0.0,
               "assertions": [check]}  # fmt: skip
    result["evaluators_results"] = [network, dict(network)]
    return result


def _attempt(run: Path, task_id: int, index: int, result: dict[str, Any], **record: Any) -> None:
    attempt = {"attempt": f"a{task_id}-{index}", "session": f"s{index}", "task_id": task_id, **record}
    place_run(run / str(task_id), {
        "attempt.json": json.dumps(attempt).encode(),
        "agent_response.json": b'{"task_type": "mutate", "status": "SUCCESS", "retrieved_data": null}',
        "network.har": HAR,
        "eval_result.json": json.dumps(result).encode(),
    })  # fmt: skip


def test_lease_ended_exposed_and_resets_in_the_terminal_json_and_html_reports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "out"
    exposed = {"exposed": True, "count": 1, "mutations": [{"session": "other", "method": "POST", "url": "u"}]}
    _attempt(run, 1004, 1, _twice_failed(1004))
    _attempt(run, 1004, 2, _twice_failed(1004), lease_ended="timeout")
    _attempt(run, 1001, 1, _result(1001, "success"), interference=exposed)
    counters = {"resets": 3, "resets_skipped": 1, "resets_failed": 0, "reset_seconds": 4.5}
    (run / POOL_FILE).write_text(json.dumps({"isolation": "readers", "sites": {"__SHOPPING__": counters}}))

    assert main(["report", str(run), "--tasks", "demo", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["lease_ended"] == [{"task_id": 1004, "folder": "1004", "lease_ended": "timeout"}]
    (check,) = [c for c in document["failing_checks"] if c["check"].startswith("NetworkEventEvaluator")]
    assert check["count"] == 2 and check["reasons"][0]["folders"] == [".attempts/1004/1", "1004"]

    assert main(["report", str(run), "--tasks", "demo"]) == 0
    terminal = " ".join(capsys.readouterr().out.split())
    assert "lease ended before the finish: 1 attempt(s): 1004 (timeout)" in terminal
    assert "exposed: 1 of 3 attempts" in terminal and "__SHOPPING__ 3 resets (4.5 s)" in terminal

    page = tmp_path / "report.html"
    assert main(["report", str(run), "--tasks", "demo", "--html", str(page)]) == 0
    capsys.readouterr()
    text = page.read_text()
    for key, words in (
        ("lease-ended", "lease ended before the finish: 1 attempt(s): 1004 (timeout)"),
        ("exposed", "exposed: 1 of 3 attempts"),
        ("exposed-by-site", "exposed by site: shopping 1"),
        ("pool", "__SHOPPING__ 3 resets (4.5 s), 1 skipped, 0 failed"),
    ):
        assert f"<p id={key}>" in text and words in text, (key, words)
    assert "2 attempt(s):" in text and "4 attempt(s)" not in text  # each attempt once in the checks
