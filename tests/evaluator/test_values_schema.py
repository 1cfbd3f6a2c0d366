"""The schema walk: which type each part of a value gets, strict and lenient modes, reports."""

from __future__ import annotations

from functools import partial

import pytest

from webarena_live.evaluator.errors import NormalizationError, UnknownValueTypeError
from webarena_live.evaluator.sites import SiteMap
from webarena_live.evaluator.values import (
    Currency,
    Duration,
    Number,
    Text,
    normalize,
    normalize_list,
    normalize_single,
    report,
    value_type,
)

PRICES = {"type": "array", "items": {"type": "number", "format": "currency"}}
ORDERS = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {"amount": {"type": "number", "format": "currency"}, "names": {"type": "array"}},
    },
}


def test_format_takes_precedence_over_type() -> None:
    assert isinstance(normalize_single("$5", "currency", strict=True), Currency)
    assert normalize("$5", {"type": "number", "format": "currency"}, strict=True) == Currency(5)
    assert isinstance(normalize("5", {}, strict=True), Text)


def test_lists_of_values_and_alternatives_inside_them() -> None:
    values = normalize_list([[10, 17], "$15.00"], PRICES, strict=True)
    assert values is not None and len(values) == 2
    assert values[0].alternatives == (10, 17) and values[1] == Currency(15)


def test_objects_get_per_property_types_and_unknown_properties_are_text() -> None:
    (order,) = (
        normalize_list([{"amount": "$3", "names": ["a", "b"], "note": "Hi"}], ORDERS, strict=True) or ()
    )
    assert order["amount"] == Currency(3)
    assert order["names"] == (Text("a"), Text("b"))
    assert order["note"] == Text("hi")


def test_strict_raises_and_lenient_keeps_the_raw_value() -> None:
    with pytest.raises(NormalizationError):
        normalize_list(["unknown"], PRICES, strict=True)
    assert normalize_list(["unknown", "$2"], PRICES, strict=False) == ("unknown", Currency(2))


def test_lenient_lists_accept_json_text_and_single_values() -> None:
    assert normalize_list('["$1", "$2"]', PRICES, strict=False) == (Currency(1), Currency(2))
    assert normalize_list("$1", PRICES, strict=False) == (Currency(1),)
    with pytest.raises(NormalizationError):
        normalize_list("$1", PRICES, strict=True)


def test_a_non_array_results_schema_cannot_describe_data() -> None:
    with pytest.raises(NormalizationError):
        normalize_list(["x"], {"type": "null"}, strict=False)


def test_unknown_types_are_schema_errors_even_when_lenient() -> None:
    with pytest.raises(UnknownValueTypeError):
        normalize_list(["x"], {"type": "array", "items": {"format": "colour"}}, strict=False)
    with pytest.raises(UnknownValueTypeError):
        value_type("colour")
    # Inside an object an unknown format falls back to text, as in the reference.
    body = normalize({"c": "Red"}, {"type": "object", "properties": {"c": {"format": "colour"}}}, strict=True)
    assert body == {"c": Text("red")}


def test_request_bodies_without_schema_are_objects_of_text() -> None:
    body = normalize({"title": "Hello", "count": 3, "gone": None}, None, strict=False)
    assert body == {"title": Text("hello"), "count": Text("3"), "gone": None}
    assert normalize({}, None, strict=True) is None and normalize("", {"type": "string"}, strict=True) is None


def test_derender_url_is_applied_to_text_that_holds_a_url() -> None:
    sites = SiteMap.from_dict({"environments": {"__SHOPPING__": {"urls": ["http://127.0.0.1:7770"]}}})
    bound = partial(sites.derender, sites=("shopping",))
    value = normalize_single("http://127.0.0.1:7770/item", "string", strict=True, derender_url=bound)
    assert value == Text("__shopping__/item")


def test_report_gives_plain_json() -> None:
    values = normalize_list(
        ["1h 30m", "$2.50"], {"type": "array", "items": {"format": "duration"}}, strict=False
    )
    assert report(values) == ["1:30:00", "$2.50"]
    assert report({"a": (Number(2), Currency("$1.5"))}) == {"a": [2.0, 1.5]}
    assert isinstance(values and values[0], Duration)
