"""The AgentResponseEvaluator on small hand-written tasks (the oracle comparison is in test_values_parity)."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

from webarena_live.evaluator.response_evaluator import evaluate_response
from webarena_live.evaluator.results import EvalStatus
from webarena_live.evaluator.sites import SiteMap
from webarena_live.evaluator.tasks import Task, parse_task


def make_task(expected: dict[str, Any], schema: dict[str, Any], *, ordered: bool = False) -> Task:
    return parse_task(
        {
            "sites": ["shopping"],
            "task_id": 7,
            "intent_template_id": 1,
            "start_urls": ["__SHOPPING__"],
            "intent": "What did I buy?",
            "intent_template": "What did I buy?",
            "instantiation_dict": {},
            "revision": 1,
            "eval": [
                {
                    "evaluator": "AgentResponseEvaluator",
                    "ordered": ordered,
                    "results_schema": schema,
                    "expected": expected,
                }
            ],
        }
    )


PRICES = make_task(
    {"task_type": "retrieve", "status": "SUCCESS", "retrieved_data": [[19.99, 20], 5]},
    {"type": "array", "items": {"type": "number", "format": "currency"}},
)
MUTATE = make_task({"task_type": "mutate", "status": "SUCCESS", "retrieved_data": None}, {"type": "null"})
NOT_FOUND = make_task(
    {"task_type": "retrieve", "status": "NOT_FOUND_ERROR", "retrieved_data": None}, {"type": "null"}
)


def judge(task: Task, response: Any, **options: Any) -> tuple[EvalStatus, float]:
    result = evaluate_response(task.response_config, response, task=task, **options)
    return result.status, result.score


def test_the_expected_answer_passes_in_any_order_and_notation() -> None:
    answer = {"task_type": "RETRIEVE", "status": "SUCCESS", "retrieved_data": ["$5.00", "19.99"]}
    assert judge(PRICES, answer) == (EvalStatus.SUCCESS, 1.0)
    fenced = "```json\n" + json.dumps(answer) + "\n```"
    assert judge(PRICES, fenced) == (EvalStatus.SUCCESS, 1.0)


def test_seed_names_are_accepted() -> None:
    assert (
        judge(PRICES, {"action": "retrieve", "status": "success", "results": [5, 19.99]})[0]
        == EvalStatus.SUCCESS
    )


def test_wrong_answers_fail() -> None:
    base = {"task_type": "retrieve", "status": "SUCCESS"}
    assert judge(PRICES, {**base, "retrieved_data": [5, 21]})[0] == EvalStatus.FAILURE
    assert judge(PRICES, {**base, "retrieved_data": [5]})[0] == EvalStatus.FAILURE
    assert judge(PRICES, {**base, "retrieved_data": None})[0] == EvalStatus.FAILURE
    assert (
        judge(PRICES, {**base, "status": "NOT_FOUND_ERROR", "retrieved_data": [5, 20]})[0]
        == EvalStatus.FAILURE
    )
    assert judge(PRICES, "the prices are 5 and 20")[0] == EvalStatus.FAILURE
    assert judge(PRICES, None)[0] == EvalStatus.FAILURE


def test_ordered_tasks_need_the_order() -> None:
    task = make_task(
        {"task_type": "retrieve", "status": "SUCCESS", "retrieved_data": ["a", "b"]},
        {"type": "array", "items": {"type": "string"}},
        ordered=True,
    )
    assert judge(task, {"task_type": "retrieve", "status": "SUCCESS", "retrieved_data": ["A", "B"]})[1] == 1.0
    assert judge(task, {"task_type": "retrieve", "status": "SUCCESS", "retrieved_data": ["b", "a"]})[1] == 0.0


def test_data_is_ignored_for_mutate_tasks_but_an_error_for_retrieve_tasks_expecting_none() -> None:
    assert judge(MUTATE, {"task_type": "mutate", "status": "SUCCESS", "retrieved_data": ["done"]})[1] == 1.0
    assert judge(NOT_FOUND, {"task_type": "retrieve", "status": "NOT_FOUND_ERROR"})[1] == 1.0
    status, _ = judge(
        NOT_FOUND, {"task_type": "retrieve", "status": "NOT_FOUND_ERROR", "retrieved_data": ["x"]}
    )
    assert status == EvalStatus.ERROR


def test_a_status_that_is_not_text_is_an_error_naming_the_field() -> None:
    result = evaluate_response(MUTATE.response_config, {"task_type": "mutate", "status": None}, task=MUTATE)
    assert result.status == EvalStatus.ERROR and result.score == 0.0
    assert result.error_msg is not None and "'status' must be a string" in result.error_msg


def test_the_result_reports_raw_normalized_and_expected_values() -> None:
    answer = {"task_type": "retrieve", "status": "SUCCESS", "retrieved_data": ["$5.00", "19.99"]}
    result = evaluate_response(PRICES.response_config, answer, task=PRICES)
    assert result.evaluator_name == "AgentResponseEvaluator"
    assert result.actual == answer
    assert result.actual_normalized == {
        "task_type": "retrieve",
        "status": "success",
        "retrieved_data": [5.0, 19.99],
    }
    assert result.expected == {"task_type": "retrieve", "status": "success", "retrieved_data": [19.99, 5.0]}
    assert json.loads(result.model_dump_json())["score"] == 1.0


def test_urls_in_answers_are_derendered_before_comparison() -> None:
    task = make_task(
        {"task_type": "retrieve", "status": "SUCCESS", "retrieved_data": ["__SHOPPING__/checkout"]},
        {"type": "array", "items": {"type": "string"}},
    )
    sites = shopping_at("http://127.0.0.1:7770")
    answer = {
        "task_type": "retrieve",
        "status": "SUCCESS",
        "retrieved_data": ["http://127.0.0.1:7770/checkout"],
    }
    assert judge(task, answer)[0] == EvalStatus.FAILURE
    assert (
        judge(task, answer, derender_url=partial(sites.derender, sites=task.sites))[0] == EvalStatus.SUCCESS
    )


def test_every_official_task_normalizes_its_expected_answer(official_dataset: Path) -> None:
    tasks = [parse_task(raw) for raw in json.loads(official_dataset.read_text())]
    for task in tasks:
        expected = task.response_config.expected
        answer = {
            "task_type": expected.task_type.value,
            "status": expected.status.value,
            "retrieved_data": [],
        }
        result = evaluate_response(task.response_config, answer, task=task)
        assert result.status != EvalStatus.ERROR, (task.task_id, result.error_msg)


def shopping_at(base_url: str) -> SiteMap:
    return SiteMap.from_dict({"environments": {"__SHOPPING__": {"urls": [base_url]}}})


def test_expected_answers_are_normalized_once_per_site_map_not_once_per_call() -> None:
    task = make_task(
        {"task_type": "retrieve", "status": "SUCCESS", "retrieved_data": ["http://10.0.0.1/checkout"]},
        {"type": "array", "items": {"type": "string"}},
    )
    answer = {"task_type": "retrieve", "status": "SUCCESS", "retrieved_data": ["__SHOPPING__/checkout"]}
    mapped, unmapped = shopping_at("http://10.0.0.1"), shopping_at("http://10.9.9.9")
    for _ in range(3):  # fresh partials every call, alternating site maps: each keeps its own verdict
        assert judge(task, answer, derender_url=partial(mapped.derender, sites=task.sites))[1] == 1.0
        assert judge(task, answer, derender_url=partial(unmapped.derender, sites=task.sites))[1] == 0.0
