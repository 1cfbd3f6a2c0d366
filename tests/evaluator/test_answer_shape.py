"""Answer-shape warnings (`evaluator/answer_shape.py`): jsonschema's word on the answer, never the verdict."""

from __future__ import annotations

from typing import Any

import pytest

from scripts.support.conformance import golden as g
from webarena_live.evaluator.answer_shape import shape_warnings
from webarena_live.evaluator.evaluate import evaluate_task
from webarena_live.evaluator.har import event_from_har_entry
from webarena_live.evaluator.sites import SiteMap
from webarena_live.evaluator.tasks import TaskSet
from webarena_live.evaluator.trace import NetworkTrace

NUMBERS = {"type": "array", "items": {"type": "number"}}


@pytest.mark.parametrize(
    ("answer", "schema", "expected"),
    [
        ({"action": "retrieve", "status": "SUCCESS", "results": [12]}, NUMBERS, []),
        (
            {"action": "retrieve", "status": "SUCCESS", "results": ["twelve"]},
            NUMBERS,
            ["results/0: 'twelve' is not of type 'number'"],
        ),
        (
            {"task_type": "RETRIEVE", "status": "SUCCESS", "retrieved_data": [1, "x"]},
            NUMBERS,
            ["retrieved_data/1: 'x' is not of type 'number'"],
        ),
        ({"action": "navigate", "status": "success", "results": []}, {"type": "null"}, []),
        (
            {"action": "browse", "status": "DONE", "results": None},
            {"type": "null"},
            ["action: 'browse' does not match", "status: 'DONE' does not match"],
        ),
        (
            {"status": "SUCCESS"},
            None,
            ["(answer): 'action' is a required property", "(answer): 'results' is a required property"],
        ),
        ([1, 2], NUMBERS, ["(answer): the answer should be a JSON object, got list"]),
        (
            {"action": "retrieve", "status": "SUCCESS", "results": "12"},
            NUMBERS,
            ["results: '12' is not of type 'array', 'null'", "results: '12' is not of type 'array'"],
        ),
    ],
)
def test_each_violation_is_one_line_with_its_pointer(answer: Any, schema: Any, expected: list[str]) -> None:
    found = shape_warnings(answer, schema)
    assert len(found) == len(expected), found
    for line, start in zip(found, expected, strict=True):
        assert line.startswith(start), (line, start)


def test_an_unusable_results_schema_is_said_once() -> None:
    (line,) = shape_warnings({"action": "retrieve", "status": "SUCCESS", "results": [1]}, {"type": "nope"})
    assert line.startswith("the task's results_schema is not a valid JSON Schema")


@pytest.fixture(scope="module")
def official(official_tasks: TaskSet, official_raw: dict[int, Any]) -> tuple[TaskSet, dict[int, Any]]:
    return official_tasks, official_raw


def test_warnings_reach_the_result_and_never_change_the_verdict(
    official: tuple[TaskSet, dict[int, Any]],
) -> None:
    tasks, raw_tasks = official
    site_map = SiteMap.from_dict(g.site_config())
    task_id = next(
        i
        for i, t in tasks.items()
        if t.response_config.results_schema.get("items", {}).get("type") == "number"
    )
    raw, task = raw_tasks[task_id], tasks[task_id]
    trace = NetworkTrace(event_from_har_entry(e) for e in g.build_entries(raw, g.targets_for(raw)))
    golden = g.golden_response(raw)
    clean = evaluate_task(task, golden, trace, site_map=site_map)
    worded = {**golden, "retrieved_data": [str(v) for v in golden["retrieved_data"]]}
    flagged = evaluate_task(task, worded, trace, site_map=site_map)
    assert clean.warnings is None
    assert flagged.warnings and any(w.startswith("retrieved_data/0: ") for w in flagged.warnings)
    assert (flagged.status, flagged.score) == (clean.status, clean.score)
