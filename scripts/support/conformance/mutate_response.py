"""Mutations of the golden answer: wrong answers, and the same answer written differently."""

from __future__ import annotations

import json
from typing import Any

from scripts.support.conformance import golden as g
from scripts.support.conformance.mutate_common import (
    FORMAT_STYLES,
    format_variant,
    item_schema,
    make_case,
    with_data,
    wrong_value,
)
from scripts.support.conformance.mutate_common import golden_entries as _golden_entries
from scripts.support.conformance.mutate_common import results_schema as _schema
from scripts.support.conformance.runs import RawText, RunCase

# ---------------------------------------------------------------- response groups


def response_wrong(task: dict[str, Any], targets: list[g.Target], response: dict[str, Any]) -> list[RunCase]:
    entries = _golden_entries(task, targets)
    data = response.get("retrieved_data")
    out = []
    if data:
        out.append(
            make_case(
                task,
                "wrong_value",
                with_data(response, [wrong_value(data[0], item_schema(task)), *data[1:]]),
                entries,
            )
        )
        out.append(make_case(task, "missing_item", with_data(response, data[:-1] or None), entries))
        out.append(make_case(task, "extra_item", with_data(response, [*data, data[0]]), entries))
    other_status = "NOT_FOUND_ERROR" if response["status"].upper() == "SUCCESS" else "SUCCESS"
    out.append(make_case(task, "wrong_status", {**response, "status": other_status}, entries))
    kinds = ["retrieve", "navigate", "mutate"]
    other_type = kinds[(kinds.index(response["task_type"].lower()) + 1) % 3]
    out.append(make_case(task, "wrong_task_type", {**response, "task_type": other_type}, entries))
    if not data:
        out.append(make_case(task, "unexpected_data", with_data(response, ["surprise"]), entries))
    return out


def response_format(task: dict[str, Any], targets: list[g.Target], response: dict[str, Any]) -> list[RunCase]:
    entries = _golden_entries(task, targets)
    data = response.get("retrieved_data")
    out = []
    if data:
        out.append(
            make_case(task, "value_format", with_data(response, format_variant(data, _schema(task))), entries)
        )
        if len(data) > 1:
            out.append(make_case(task, "reordered", with_data(response, list(reversed(data))), entries))
        out.append(make_case(task, "scalar_not_list", with_data(response, data[0]), entries))
    else:
        out.append(make_case(task, "empty_list_for_null", with_data(response, []), entries))
        without = {k: v for k, v in response.items() if k != "retrieved_data"}
        out.append(make_case(task, "data_key_absent", without, entries))
    out.append(
        make_case(
            task,
            "enum_case",
            {
                **response,
                "task_type": response["task_type"].upper(),
                "status": response["status"].lower().title(),
            },
            entries,
        )
    )
    out.append(make_case(task, "with_error_details", {**response, "error_details": "  none  "}, entries))
    return out


def response_text(task: dict[str, Any], targets: list[g.Target], response: dict[str, Any]) -> list[RunCase]:
    entries = _golden_entries(task, targets)
    body = json.dumps(response, indent=2, ensure_ascii=False)
    legacy = {("performed_operation" if k == "task_type" else k): v for k, v in response.items()}
    return [
        make_case(task, "code_fence_json", RawText(f"```json\n{body}\n```"), entries),
        make_case(task, "code_fence_plain", RawText(f"Here is my answer:\n```\n{body}\n```\nDone."), entries),
        make_case(task, "padded_json_text", RawText(f"\n\n   {body}   \n"), entries),
        make_case(task, "legacy_performed_operation", legacy, entries),
        make_case(task, "not_json_text", RawText(f"The answer is {response.get('retrieved_data')}"), entries),
    ]


def response_values(task: dict[str, Any], targets: list[g.Target], response: dict[str, Any]) -> list[RunCase]:
    """The expected data rewritten in each format style (only tasks that expect data)."""
    data = response.get("retrieved_data")
    if not data:
        return []
    entries = _golden_entries(task, targets)
    return [
        make_case(
            task, f"values_{style}", with_data(response, format_variant(data, _schema(task), style)), entries
        )
        for style in FORMAT_STYLES
    ]


def seed_names(task: dict[str, Any], targets: list[g.Target], response: dict[str, Any]) -> list[RunCase]:
    renamed = {
        "action": response["task_type"],
        "status": response["status"],
        "results": response.get("retrieved_data"),
    }
    return [make_case(task, "seed_action_results", renamed, _golden_entries(task, targets))]
