"""Value normalization: one class per value type, and the schema walk that picks them.

    normalize(value, schema, strict=...)        a value described by a JSON-schema-like mapping
    normalize_single(value, kind, strict=...)   one value of a named type or format
    normalize_list(values, results_schema, strict=...)  an answer's `retrieved_data`
    report(value)                               the plain JSON view of a normalized value

Normalized values compare with `==` the way the reference evaluator compares
them (tolerances, regexes, alternatives); `evaluator.compare` walks lists and
objects of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from decimal import Decimal
from typing import Any

from webarena_live.evaluator.errors import UnknownValueTypeError
from webarena_live.evaluator.values.address import FullAddress
from webarena_live.evaluator.values.base import DerenderUrl, Normalized, clean_text, is_regexp
from webarena_live.evaluator.values.dates import Date, Duration, Month
from webarena_live.evaluator.values.encoded import Base64Text, JsonText, MarkdownText, StringList
from webarena_live.evaluator.values.geo import Coordinates, Distance
from webarena_live.evaluator.values.numbers import Boolean, Currency, Empty, Number
from webarena_live.evaluator.values.schema import Walker
from webarena_live.evaluator.values.text import LocationName, Text

VALUE_TYPES: dict[str, type[Normalized]] = {
    "string": Text,
    "number": Number,
    "integer": Number,  # the reference reads integers as plain numbers too
    "boolean": Boolean,
    "null": Empty,
    "currency": Currency,
    "date": Date,
    "month": Month,
    "duration": Duration,
    "distance": Distance,
    "coordinates": Coordinates,
    "location-name": LocationName,
    "full_address": FullAddress,
    "json": JsonText,
    "markdown": MarkdownText,
    "base64": Base64Text,
    "string_list": StringList,
}
"""Every type and format name a schema may use, except `url` (see `value_type`)."""


def value_type(kind: Any) -> type[Normalized]:
    """The class serving a schema `type`/`format` name; `UnknownValueTypeError` for any other."""
    if kind == "url":
        # URLs belong to the network side of the evaluator; imported on demand.
        from webarena_live.evaluator.values.url import Url

        return Url
    try:
        return VALUE_TYPES[kind]
    except (KeyError, TypeError):
        known = ", ".join(sorted([*VALUE_TYPES, "url"]))
        raise UnknownValueTypeError(f"unknown value type {kind!r}; known types: {known}") from None


def normalize(
    value: Any, schema: Mapping[str, Any] | None, *, strict: bool, derender_url: DerenderUrl | None = None
) -> Any:
    """Normalize `value` as `schema` describes it: Normalized instances inside tuples and dicts.

    Empty values (None, "", [], {}, 0) give None. strict=True raises
    `NormalizationError` on a value that does not fit; strict=False keeps it raw.
    """
    return Walker(value_type, strict=strict, derender_url=derender_url).value(value, schema)


def normalize_single(
    value: Any, kind: str, *, strict: bool, derender_url: DerenderUrl | None = None, **options: Any
) -> Any:
    """One value of type `kind` ("string", "currency", "url", ...); a list is a set of alternatives.

    `options` go to the type's constructor (the URL type takes some).
    """
    return Walker(value_type, strict=strict, derender_url=derender_url).make(kind, value, **options)


def normalize_list(
    values: Any,
    results_schema: Mapping[str, Any] | None,
    *,
    strict: bool,
    derender_url: DerenderUrl | None = None,
) -> tuple[Any, ...] | None:
    """An answer's retrieved data (a list) by the task's `results_schema` (an array schema).

    Lenient mode reads a string holding a JSON list as that list and wraps a
    single value in a list, as the reference does for agents' answers.
    """
    return Walker(value_type, strict=strict, derender_url=derender_url).response_items(values, results_schema)


def report(value: Any) -> Any:
    """The plain JSON view of a (possibly nested) normalized value, for results files."""
    if isinstance(value, Normalized):
        return _plain(value.normalized)
    if isinstance(value, Mapping):
        return {str(key): report(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [report(item) for item in value]
    return _plain(value)


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, timedelta):
        return str(value)
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return str(value)


__all__ = [
    "VALUE_TYPES",
    "Base64Text",
    "Boolean",
    "Coordinates",
    "Currency",
    "Date",
    "DerenderUrl",
    "Distance",
    "Duration",
    "Empty",
    "FullAddress",
    "JsonText",
    "LocationName",
    "MarkdownText",
    "Month",
    "Normalized",
    "Number",
    "StringList",
    "Text",
    "clean_text",
    "is_regexp",
    "normalize",
    "normalize_list",
    "normalize_single",
    "report",
    "value_type",
]
