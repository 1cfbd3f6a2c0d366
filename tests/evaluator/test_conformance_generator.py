"""The conformance generator's own building blocks, checked directly."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from scripts.support.conformance import golden as g
from scripts.support.conformance import mutations
from scripts.support.conformance.regex_example import NoExample, regex_example
from webarena_live.evaluator.har import event_from_har_entry
from webarena_live.evaluator.trace import EventType


def _patterns(node: Any) -> list[str]:
    if isinstance(node, str):
        return [node] if len(node) >= 2 and node.startswith("^") and node.endswith("$") else []
    if isinstance(node, list):
        return [p for item in node for p in _patterns(item)]
    if isinstance(node, dict):
        return [p for key, value in node.items() for p in _patterns(key) + _patterns(value)]
    return []


@pytest.fixture(scope="module")
def raw_tasks(official_dataset: Path) -> list[dict[str, Any]]:
    return json.loads(official_dataset.read_text())


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        (r"^__SHOPPING__/[a-z0-9-]*(?:guard|mouth)[a-z0-9-]*\.html$", "__SHOPPING__/aguarda.html"),
        (r"^reply_to_submission_\d+\[comment\]$", "reply_to_submission_1[comment]"),
        (r"^.*(?=.*laundry)(?=.*detergent).* added.*$", None),
        (r"^(opened|)$", "opened"),
    ],
)
def test_regex_examples(pattern: str, expected: str | None) -> None:
    example = regex_example(pattern)
    assert re.fullmatch(pattern, example)
    if expected is not None:
        assert example == expected


def test_back_references_have_no_example() -> None:
    with pytest.raises(NoExample):
        regex_example(r"^(a)\1$")


def test_every_pattern_in_the_dataset_gets_an_example(raw_tasks: list[dict[str, Any]]) -> None:
    patterns = {p for task in raw_tasks for p in _patterns(task["eval"])}
    assert len(patterns) > 100
    missing = []
    for pattern in patterns:
        try:
            body = pattern[2:] if pattern.startswith("$.^") else pattern
            assert re.fullmatch(body, regex_example(body))
        except (NoExample, re.error):
            missing.append(pattern)
    assert len(missing) <= len(patterns) // 50, missing


def test_golden_traces_look_like_chromium(raw_tasks: list[dict[str, Any]]) -> None:
    for task in raw_tasks[::7]:
        events = [event_from_har_entry(e) for e in g.build_entries(task, g.targets_for(task))]
        assert events[0].event_type == EventType.NAVIGATION and events[0].is_navigation
        assert any(not e.is_evaluation for e in events), "static assets are part of the noise"
        for event in events:
            if event.headers.get("sec-fetch-dest") == "document" and event.method == "GET":
                assert event.is_navigation, event.url


def test_golden_response_takes_first_alternatives() -> None:
    schema = {"type": "array", "items": {"type": "object", "properties": {"tags": {"type": "array"}}}}
    value = [{"name": ["Alpha", "A"], "tags": ["x", "y"]}]
    assert g.first_alternative(value, schema) == [{"name": "Alpha", "tags": ["x", "y"]}]
    assert g.nested_document({"$.note.note": "hi", "$.^reply_\\d+$": "r", "plain": 1}) == {
        "note": {"note": "hi"},
        "reply_1": "r",
        "plain": 1,
    }


def test_every_group_has_cases_and_rotates_kinds(raw_tasks: list[dict[str, Any]]) -> None:
    kinds: dict[str, set[str]] = {name: set() for name in mutations.GROUPS}
    for task in raw_tasks[:200]:
        targets, response = g.targets_for(task), g.golden_response(task)
        for name, make in mutations.GROUPS.items():
            chosen = mutations.pick(task["task_id"], make(task, targets, response))
            if chosen is not None:
                kinds[name].add(chosen.case)
    assert all(kinds.values()), kinds
    assert len(kinds["network_missing"]) >= 4 and len(kinds["response_text"]) == 5
