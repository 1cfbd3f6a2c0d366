"""Structural comparison: lists in and out of order, objects, None, and the failure messages."""

from __future__ import annotations

import pytest

from webarena_live.evaluator.compare import compare
from webarena_live.evaluator.errors import ComparisonError
from webarena_live.evaluator.results import EvalStatus
from webarena_live.evaluator.values import Currency, Number, Text


def numbers(*values: float) -> tuple[Number, ...]:
    return tuple(Number(v) for v in values)


def names(assertions: list) -> list[str]:
    return sorted(a.assertion_name for a in assertions)


def test_equal_values_give_no_assertion() -> None:
    assert compare(Text("A"), Text("a"), ordered=False, value_name="v") == []
    assert compare(None, None, ordered=False, value_name="v") == []


def test_a_leaf_mismatch_names_the_path_and_both_values() -> None:
    (failure,) = compare(Number(2), Number(3), ordered=False, value_name="v")
    assert failure.assertion_name == "v_mismatch"
    assert failure.status == EvalStatus.FAILURE
    assert failure.assertion_msgs == ("Expected 3.0, got 2.0",)


def test_none_against_a_value_fails() -> None:
    assert names(compare(None, Number(1), ordered=False, value_name="v")) == ["v_none_mismatch"]
    assert names(compare(Number(1), None, ordered=False, value_name="v")) == ["v_none_mismatch"]


def test_unordered_lists_match_greedily_and_count_duplicates() -> None:
    assert compare(numbers(3, 1, 2), numbers(1, 2, 3), ordered=False, value_name="v") == []
    (failure,) = compare(numbers(1, 2), numbers(1, 1), ordered=False, value_name="v")
    assert failure.assertion_name == "v_array_values_mismatch"
    assert failure.assertion_msgs is not None and "matched 1/2" in failure.assertion_msgs[0]
    (extra,) = compare(numbers(1, 2, 3), numbers(1, 2), ordered=False, value_name="v")
    assert extra.assertion_msgs is not None and "1 unexpected" in extra.assertion_msgs[0]


def test_ordered_lists_compare_by_position_and_length() -> None:
    assert compare(numbers(1, 2), numbers(1, 2), ordered=True, value_name="v") == []
    assert names(compare(numbers(2, 1), numbers(1, 2), ordered=True, value_name="v")) == [
        "v[0]_mismatch",
        "v[1]_mismatch",
    ]
    assert names(compare(numbers(1), numbers(1, 2), ordered=True, value_name="v")) == [
        "v_array_values_mismatch"
    ]


def test_long_lists_are_shortened_in_messages() -> None:
    (failure,) = compare(numbers(1, 2, 3, 4, 5), numbers(9), ordered=False, value_name="v")
    assert failure.assertion_msgs is not None
    assert failure.assertion_msgs[1] == "Expected [9.0], got [1.0, 2.0, ..., 5.0]"


def test_objects_need_the_same_keys_unless_extra_keys_are_allowed() -> None:
    expected = {"price": Currency(10), "name": Text("pen")}
    assert (
        compare({"price": Currency("$10.05"), "name": Text("Pen")}, expected, ordered=False, value_name="o")
        == []
    )
    found = compare({"price": Currency(10), "colour": Text("red")}, expected, ordered=False, value_name="o")
    assert names(found) == ["o_keys_mismatch"]
    assert found[0].assertion_msgs == ("Unexpected keys: ['colour']", "Missing keys: ['name']")
    loose = compare(
        {**expected, "colour": Text("red")}, expected, ordered=False, value_name="o", ignore_extra_keys=True
    )
    assert loose == []


def test_ignored_keys_are_present_but_not_compared() -> None:
    expected = {"status": Text("ok"), "data": Number(1)}
    assert (
        compare(
            {"status": Text("ok"), "data": Number(2)},
            expected,
            ordered=False,
            value_name="r",
            ignored_keys=("data",),
        )
        == []
    )


def test_wrong_shapes_fail_as_invalid_format() -> None:
    assert names(compare(Text("x"), {"a": Text("x")}, ordered=False, value_name="v")) == ["v_invalid_format"]
    assert names(compare(Text("x"), numbers(1), ordered=False, value_name="v")) == ["v_invalid_format"]


def test_nested_structures_report_the_full_path() -> None:
    expected = ({"items": numbers(1, 2)},)
    found = compare(({"items": numbers(1, 3)},), expected, ordered=True, value_name="data")
    assert names(found) == ["data[0].items[1]_mismatch"]


def test_the_same_container_twice_cannot_be_compared() -> None:
    shared = [Number(1)]
    with pytest.raises(ComparisonError):
        compare([shared, shared], [numbers(1), numbers(1)], ordered=True, value_name="v")
    with pytest.raises(ComparisonError):
        compare({"a": Text("x")}, {}, ordered=False, value_name="v")
