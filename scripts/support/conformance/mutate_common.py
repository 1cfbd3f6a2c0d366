"""Shared helpers of the mutation groups: value variants and case construction."""

from __future__ import annotations

from typing import Any

import dateutil.parser

from scripts.support.conformance import golden as g
from scripts.support.conformance.runs import RunCase


def golden_entries(task: dict[str, Any], targets: list[g.Target], **options: Any) -> list[dict[str, Any]]:
    return g.build_entries(task, targets, **options)


def results_schema(task: dict[str, Any]) -> dict[str, Any]:
    config = next(e for e in task["eval"] if e["evaluator"] == "AgentResponseEvaluator")
    return config.get("results_schema") or {}


def item_schema(task: dict[str, Any]) -> dict[str, Any]:
    return results_schema(task).get("items") or {}


def first_live(targets: list[g.Target]) -> int | None:
    return next((i for i, t in enumerate(targets) if not t.should_not_exist), None)


# ---------------------------------------------------------------- value variants


def wrong_value(value: Any, schema: dict[str, Any]) -> Any:
    """A value of the same type that should not match."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 7
    if isinstance(value, dict):
        props = schema.get("properties", {})
        for key, item in value.items():
            if item is not None:
                return {**value, key: wrong_value(item, props.get(key, {}))}
        return {**value, "unexpected": "value"}
    if isinstance(value, list):
        return [*value, "unexpected extra"]
    if isinstance(value, str):
        return value + " and something else entirely"
    return "not null"


FORMAT_STYLES = ("mixed", "typed", "text")
"""mixed: every value rewritten; typed: only numbers, booleans, dates, ...; text: only plain strings."""


def format_variant(value: Any, schema: dict[str, Any], style: str = "mixed") -> Any:
    """The same value written another way (case, spacing, currency sign, date style, ...)."""
    fmt = schema.get("format")
    if isinstance(value, dict):
        props = schema.get("properties", {})
        return {k: format_variant(v, props.get(k, {}), style) for k, v in value.items()}
    if isinstance(value, list):
        return [format_variant(v, schema.get("items", {}), style) for v in value]
    if style == "text":
        return f"  {value.upper()} " if isinstance(value, str) and not fmt else value
    if isinstance(value, bool):
        return ("yes" if value else "no") if style == "mixed" else str(value).lower()
    if fmt == "currency" and isinstance(value, int | float):
        return f"${value:,.2f}" if style == "mixed" else f"{value:.2f} USD"
    if isinstance(value, int | float):
        return str(value) if style == "mixed" else f" {value} "
    if not isinstance(value, str):
        return value
    if fmt == "date":
        try:
            moment = dateutil.parser.parse(value)
        except (ValueError, OverflowError):
            return value.upper()
        return moment.strftime("%Y-%m-%d" if style == "mixed" else "%m/%d/%Y")
    if fmt == "month":
        full = {m[:3].lower(): m for m in _MONTHS}
        if style == "typed":
            number = (
                [m[:3].lower() for m in _MONTHS].index(value[:3].lower()) + 1
                if value[:3].lower() in full
                else 0
            )
            return f"{number:02d}" if number else value
        return full.get(value[:3].lower(), value).upper() if len(value) <= 3 else value[:3]
    if fmt == "duration":
        return value.replace("min", " minutes").replace("h ", " hours ")
    if fmt == "distance":
        return value.replace("km", " km") if "km" in value else value.replace("m", " m")
    return f"  {value.upper()} " if style == "mixed" else value


_MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]


def with_data(response: dict[str, Any], data: Any) -> dict[str, Any]:
    return {**response, "retrieved_data": data}


def make_case(
    task: dict[str, Any], name: str, response: Any, entries: list[dict[str, Any]] | None, **kw: Any
) -> RunCase:
    return RunCase(task_id=task["task_id"], case=name, response=response, entries=entries, **kw)
