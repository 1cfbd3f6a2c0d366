"""Generated agent answers for the response parity tests (tests/evaluator/test_values_parity.py): the
golden answer of a task, then its shapes, names, statuses and data changed one at a time, each with the
values' own spellings (`value_parity_cases`). The oracle judges every one; nothing here decides a verdict.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from tests.support.value_parity_cases import first_choice, spellings


def response_variants(expected: dict[str, Any], schema: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """(label, agent answer) pairs derived from a task's expected response."""
    task_type, status = expected["task_type"], expected["status"]
    data = expected.get("retrieved_data")
    golden_data = first_choice(data, schema) if data is not None else None
    golden = {"task_type": task_type, "status": status, "retrieved_data": golden_data}
    yield "golden", golden
    yield "upper case", {**golden, "task_type": task_type.upper(), "status": status.lower()}
    yield "spaces", {**golden, "task_type": f" {task_type} ", "status": f"{status}\n"}
    yield "fenced text", f"Here is my answer:\n```json\n{json.dumps(golden)}\n```\nDone."
    yield "plain fence", f"```\n{json.dumps(golden)}\n```"
    yield "json text", json.dumps(golden)
    yield "legacy name", {"performed_operation": task_type, "status": status, "retrieved_data": golden_data}
    yield "both names", {**golden, "performed_operation": "navigate"}
    yield "no data key", {"task_type": task_type, "status": status}
    yield "null data", {**golden, "retrieved_data": None}
    yield "empty data", {**golden, "retrieved_data": []}
    yield "data given", {**golden, "retrieved_data": ["something"]}
    yield "error details", {**golden, "error_details": "none"}
    yield "wrong status", {**golden, "status": "NOT_FOUND_ERROR" if status == "SUCCESS" else "SUCCESS"}
    yield "wrong type", {**golden, "task_type": "navigate" if task_type.lower() != "navigate" else "mutate"}
    yield "status punctuation", {**golden, "status": f"{status}."}
    yield "status null", {**golden, "status": None}
    yield "status number", {**golden, "status": 200}
    yield "not json", "I could not finish the task."
    yield "none", None
    yield "list", [golden]
    yield "empty object", {}
    yield "broken fence", '```json\n{"task_type": \n```'
    if not isinstance(golden_data, list) or not golden_data:
        return
    items_schema = schema.get("items", {})
    yield "reversed", {**golden, "retrieved_data": golden_data[::-1]}
    yield "first dropped", {**golden, "retrieved_data": golden_data[1:]}
    yield "duplicated", {**golden, "retrieved_data": golden_data + golden_data[:1]}
    yield "single not list", {**golden, "retrieved_data": golden_data[0]}
    yield "list as text", {**golden, "retrieved_data": json.dumps(golden_data)}
    yield (
        "stringified items",
        {**golden, "retrieved_data": [json.dumps(i) if not isinstance(i, str) else i for i in golden_data]},
    )
    for position in sorted({0, len(golden_data) - 1}):
        for number, variant in enumerate(spellings(golden_data[position], items_schema)):
            changed = list(golden_data)
            changed[position] = variant
            yield f"item {position} spelling {number}", {**golden, "retrieved_data": changed}
