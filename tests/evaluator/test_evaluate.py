"""`evaluate_task`: one verdict from a task, a response and a trace, on official tasks.

Traces are the conformance generator's Chromium-shaped golden HARs, read back
through `evaluator.har` exactly as a recorded run would be.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from scripts.support.conformance import golden as g
from webarena_live import evaluator
from webarena_live.evaluator.evaluate import evaluate_task
from webarena_live.evaluator.har import event_from_har_entry
from webarena_live.evaluator.results import EvalStatus
from webarena_live.evaluator.sites import SiteMap
from webarena_live.evaluator.tasks import TaskSet
from webarena_live.evaluator.trace import NetworkTrace


@pytest.fixture(scope="module")
def raw_tasks(official_raw: dict[int, dict[str, Any]]) -> dict[int, dict[str, Any]]:
    return official_raw


@pytest.fixture(scope="module")
def tasks(official_tasks: TaskSet) -> TaskSet:
    return official_tasks


SITE_MAP = SiteMap.from_dict(g.site_config())


def golden_trace(raw: dict[str, Any]) -> NetworkTrace:
    return NetworkTrace(event_from_har_entry(e) for e in g.build_entries(raw, g.targets_for(raw)))


@pytest.mark.parametrize("task_id", [0, 44, 492, 506, 523, 267])
def test_golden_runs_pass_with_every_evaluator_in_task_order(
    task_id: int, tasks: TaskSet, raw_tasks: dict[int, dict[str, Any]]
) -> None:
    task = tasks[task_id]
    result = evaluate_task(
        task, g.golden_response(raw_tasks[task_id]), golden_trace(raw_tasks[task_id]), site_map=SITE_MAP,
        data_checksum="abc",
    )  # fmt: skip
    assert result.status == EvalStatus.SUCCESS and result.score == 1.0
    assert [r.evaluator_name for r in result.evaluators_results] == [c.evaluator for c in task.eval]
    assert result.webarena_verified_data_checksum == "abc"
    assert (result.task_id, result.task_revision, result.sites) == (task.task_id, task.revision, task.sites)


def test_wrong_answer_fails_and_response_text_is_accepted(
    tasks: TaskSet, raw_tasks: dict[int, dict[str, Any]]
) -> None:
    raw = raw_tasks[0]
    trace = golden_trace(raw)
    wrong = {**g.golden_response(raw), "retrieved_data": ["Another Band"]}
    assert evaluate_task(tasks[0], wrong, trace, site_map=SITE_MAP).status == EvalStatus.FAILURE
    fenced = "```json\n" + json.dumps(g.golden_response(raw)) + "\n```"
    assert evaluate_task(tasks[0], fenced, trace, site_map=SITE_MAP).status == EvalStatus.SUCCESS
    for nonsense in (None, "", "no idea", [1, 2], 42):
        result = evaluate_task(tasks[0], nonsense, trace, site_map=SITE_MAP)
        assert result.status in (EvalStatus.FAILURE, EvalStatus.ERROR) and result.score == 0.0


def test_empty_trace_is_an_error_like_the_reference(
    tasks: TaskSet, raw_tasks: dict[int, dict[str, Any]]
) -> None:
    result = evaluate_task(tasks[0], g.golden_response(raw_tasks[0]), NetworkTrace(), site_map=SITE_MAP)
    assert result.status == EvalStatus.ERROR
    assert "no events" in (result.error_msg or "")
    assert result.intent_template_id == tasks[0].intent_template_id


def test_site_map_is_completed_from_the_trace(tasks: TaskSet, raw_tasks: dict[int, dict[str, Any]]) -> None:
    raw = raw_tasks[492]  # shopping_admin: the guessed base gets /admin appended, as the reference does
    result = evaluate_task(tasks[492], g.golden_response(raw), golden_trace(raw), site_map=SiteMap())
    assert result.status == EvalStatus.SUCCESS


def test_no_site_map_and_nothing_to_guess_from_is_an_error(
    tasks: TaskSet, raw_tasks: dict[int, dict[str, Any]]
) -> None:
    only_assets = NetworkTrace(
        event_from_har_entry(e)
        for e in g.build_entries(raw_tasks[0], [])
        if e["request"]["url"].endswith(".js")
    )
    result = evaluate_task(tasks[0], g.golden_response(raw_tasks[0]), only_assets, site_map=SiteMap())
    assert result.status == EvalStatus.ERROR and result.evaluators_results == ()
    assert "__SHOPPING_ADMIN__" in (result.error_msg or "")


def test_an_evaluator_error_makes_the_task_an_error(
    tasks: TaskSet, raw_tasks: dict[int, dict[str, Any]]
) -> None:
    # Task 699's expected post data holds a one-item "alternatives" list: the reference cannot
    # normalize it and scores every run of the task as an error; so must we, without raising.
    raw = raw_tasks[699]
    result = evaluate_task(tasks[699], g.golden_response(raw), golden_trace(raw), site_map=SITE_MAP)
    assert result.status == EvalStatus.ERROR
    network = [r for r in result.evaluators_results if r.evaluator_name == "NetworkEventEvaluator"]
    assert any(r.status == EvalStatus.ERROR and r.error_msg for r in network)
    assert result.evaluators_results[0].status == EvalStatus.SUCCESS


def test_seed_rule_warnings_never_change_the_verdict(
    tasks: TaskSet, raw_tasks: dict[int, dict[str, Any]]
) -> None:
    raw = raw_tasks[0]
    mixed = {**g.golden_response(raw), "retrieved_data": ["Quest Lumaflex™ Band", 3]}
    result = evaluate_task(tasks[0], mixed, golden_trace(raw), site_map=SITE_MAP)
    assert result.warnings and result.status == EvalStatus.FAILURE
    clean = evaluate_task(tasks[0], g.golden_response(raw), golden_trace(raw), site_map=SITE_MAP)
    assert clean.warnings is None and clean.status == EvalStatus.SUCCESS


def test_public_api_is_re_exported() -> None:
    assert evaluator.__all__ == sorted(evaluator.__all__)
    for name in evaluator.__all__:
        assert getattr(evaluator, name) is not None, name
    assert evaluator.evaluate_task is evaluate_task
    with pytest.raises(AttributeError):
        _ = evaluator.no_such_thing


def test_public_api_is_re_exported_from_the_package() -> None:
    import webarena_live

    assert webarena_live.__all__ == evaluator.__all__
    for name in webarena_live.__all__:
        assert getattr(webarena_live, name) is getattr(evaluator, name), name
    with pytest.raises(AttributeError):
        _ = webarena_live.no_such_thing
