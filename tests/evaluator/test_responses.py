"""Reading an agent's final answer, the seed's rules as warnings, and the official form written out."""

from __future__ import annotations

import json

import pytest

from webarena_live.evaluator.errors import AgentResponseError
from webarena_live.evaluator.responses import (
    AgentResponse,
    parse_response,
    response_document,
    response_warnings,
)
from webarena_live.evaluator.tasks import Status, TaskType


def test_seed_names_dataset_names_and_legacy_names_all_read_the_same() -> None:
    seed = parse_response({"action": "retrieve", "status": "SUCCESS", "results": ["a"]})
    dataset = parse_response({"task_type": "RETRIEVE", "status": "success", "retrieved_data": ["a"]})
    legacy = parse_response(
        {"performed_operation": "Retrieve", "status": " Success ", "retrieved_data": ["a"]}
    )
    assert seed == dataset == legacy
    assert seed.task_type is TaskType.RETRIEVE and seed.status is Status.SUCCESS


def test_text_answers_and_json_fences() -> None:
    answer = {"action": "navigate", "status": "SUCCESS", "results": None}
    assert parse_response(json.dumps(answer)).task_type is TaskType.NAVIGATE
    fenced = f"Sure! Here it is:\n```json\n{json.dumps(answer)}\n```\nBye"
    assert parse_response(fenced).task_type is TaskType.NAVIGATE
    assert response_document("not json") == "not json"
    assert response_document("") is None and response_document({}) is None


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("I give up", "must be a JSON object"),
        ({"status": "SUCCESS"}, "no task_type / performed_operation / action field"),
        ({"action": "browse", "status": "SUCCESS"}, "'action' is 'browse'; expected one of RETRIEVE"),
        ({"action": "retrieve", "status": 1}, "'status' must be a string"),
        ({"action": "retrieve", "status": "SUCCESS", "results": "x"}, "'results' must be an array or null"),
        ({"action": "retrieve", "status": "DONE"}, "expected one of SUCCESS, ACTION_NOT_ALLOWED_ERROR"),
        ({"action": "retrieve", "status": "SUCCESS", "error_details": 3}, "'error_details' must be a string"),
    ],
)
def test_malformed_answers_are_rejected_with_a_clear_message(raw: object, message: str) -> None:
    with pytest.raises(AgentResponseError, match=message):
        parse_response(raw)


def test_official_dict_uses_the_references_field_names() -> None:
    answer = parse_response(
        {"action": "retrieve", "status": "not_found_error", "results": None, "error_details": "no such order"}
    )
    assert answer.to_official_dict() == {
        "task_type": "RETRIEVE",
        "status": "NOT_FOUND_ERROR",
        "retrieved_data": None,
        "error_details": "no such order",
    }
    assert parse_response(answer) is answer
    quiet = parse_response({"action": "navigate", "status": "SUCCESS"})
    assert quiet.to_official_dict() == {"task_type": "NAVIGATE", "status": "SUCCESS", "retrieved_data": None}
    assert isinstance(answer, AgentResponse)


def test_a_well_formed_answer_has_no_warnings() -> None:
    assert (
        response_warnings({"action": "retrieve", "status": "SUCCESS", "results": [{"a": 1}, {"a": 2}]}) == []
    )
    assert response_warnings({"action": "navigate", "status": "SUCCESS", "results": []}) == []
    assert response_warnings("not json") == []


def test_seed_rules_are_reported_as_warnings() -> None:
    mixed = response_warnings({"action": "retrieve", "status": "SUCCESS", "results": [1, "two", None]})
    assert mixed == ["'results' items should all be of one type, found: null, number, string"]
    keys = response_warnings(
        {"task_type": "retrieve", "status": "SUCCESS", "retrieved_data": [{"a": 1}, {"b": 1}]}
    )
    assert keys == [
        "'retrieved_data' objects should all have the same keys: object 2 has ['b'], object 1 has ['a']"
    ]
    navigate = response_warnings({"action": "Navigate", "status": "SUCCESS", "results": ["page"]})
    assert navigate == ["'results' should be null or empty for a navigate task, got 1 item(s)"]
    scalar = response_warnings({"action": "retrieve", "status": "SUCCESS", "results": "x"})
    assert scalar == ["'results' should be an array or null, got a string"]
