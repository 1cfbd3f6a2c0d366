"""Structural comparison of normalized values: objects key by key, lists in or out of order.

Leaves compare with `!=`, so each value type's own equality decides
(tolerances, regexes, alternatives). The result is the list of failed
assertions; an empty list means the values match. The rules follow the
reference evaluator's comparator, because verdicts depend on them:

- lists out of order are matched greedily: each expected item takes the first
  still-unmatched actual item equal to it; missing and extra items both fail;
- lists in order are compared index by index, plus a length check;
- objects must have the same keys (extra actual keys are allowed with
  `ignore_extra_keys`); values of `ignored_keys` are not compared;
- a structure that contains the same list or object twice cannot be compared
  (`ComparisonError`), as in the reference.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from webarena_live.evaluator.errors import ComparisonError
from webarena_live.evaluator.results import Assertion
from webarena_live.evaluator.values.base import Normalized


def compare(
    actual: Any,
    expected: Any,
    *,
    ordered: bool,
    value_name: str,
    ignore_extra_keys: bool = False,
    ignored_keys: Collection[str] = (),
) -> list[Assertion]:
    """Failed assertions of `actual` against `expected`; `[]` means they match."""
    walk = _Comparison(
        ordered=ordered, ignore_extra_keys=ignore_extra_keys, ignored_keys=frozenset(ignored_keys)
    )
    return walk.values(actual, expected, value_name, set())


def _shown(value: Any) -> str:
    return str(value.normalized if isinstance(value, Normalized) else value)


def _shown_list(items: Any) -> str:
    """A list for a message: all of it when short, else the first two and the last item."""
    shown = [_shown(item) for item in items]
    if len(shown) > 3:
        shown = [shown[0], shown[1], "...", shown[-1]]
    return f"[{', '.join(shown)}]"


class _Comparison:
    def __init__(self, *, ordered: bool, ignore_extra_keys: bool, ignored_keys: frozenset[str]) -> None:
        self.ordered = ordered
        self.ignore_extra_keys = ignore_extra_keys
        self.ignored_keys = ignored_keys

    def values(self, actual: Any, expected: Any, path: str, seen: set[int]) -> list[Assertion]:
        if isinstance(actual, Mapping | list | tuple):
            if id(actual) in seen:
                raise ComparisonError(
                    f"the actual value at {path} contains itself (or the same object twice)"
                )
            seen.add(id(actual))
        if expected is None and actual is None:
            return []
        if expected is None or actual is None:
            return [Assertion.failure(f"{path}_none_mismatch", f"Expected {expected}, got {actual}")]
        if isinstance(expected, Mapping):
            return self.objects(actual, expected, path, seen)
        if isinstance(expected, list | tuple):
            return self.lists(actual, expected, path, seen)
        if expected != actual:
            return [
                Assertion.failure(f"{path}_mismatch", f"Expected {_shown(expected)}, got {_shown(actual)}")
            ]
        return []

    def objects(self, actual: Any, expected: Mapping[Any, Any], path: str, seen: set[int]) -> list[Assertion]:
        if not isinstance(actual, Mapping):
            return [
                Assertion.failure(
                    f"{path}_invalid_format", f"Expected an object, got a {type(actual).__name__}"
                )
            ]
        if not expected:
            raise ComparisonError(f"the expected object at {path} has no keys")
        missing = expected.keys() - actual.keys()
        extra = actual.keys() - expected.keys()
        messages = []
        if extra and not self.ignore_extra_keys:
            messages.append(f"Unexpected keys: {sorted(extra, key=str)}")
        if missing:
            messages.append(f"Missing keys: {sorted(missing, key=str)}")
        failures = [Assertion.failure(f"{path}_keys_mismatch", *messages)] if messages else []
        for key in expected.keys() & actual.keys():
            if key in self.ignored_keys:
                continue
            failures.extend(self.values(actual[key], expected[key], f"{path}.{key}", seen))
        return failures

    def lists(
        self, actual: Any, expected: list[Any] | tuple[Any, ...], path: str, seen: set[int]
    ) -> list[Assertion]:
        if not isinstance(actual, list | tuple):
            return [
                Assertion.failure(f"{path}_invalid_format", f"Expected a list, got a {type(actual).__name__}")
            ]
        if self.ordered:
            return self.in_order(actual, expected, path, seen)
        return self.any_order(actual, expected, path, seen)

    def any_order(self, actual: Any, expected: Any, path: str, seen: set[int]) -> list[Assertion]:
        taken = [False] * len(actual)
        missing = 0
        for index, wanted in enumerate(expected):
            for position, candidate in enumerate(actual):
                if taken[position]:
                    continue
                # A failed trial must not mark the candidate's parts as seen.
                trial = set(seen)
                if not self.values(candidate, wanted, f"{path}[{index}]", trial):
                    seen |= trial
                    taken[position] = True
                    break
            else:
                missing += 1
        extra = taken.count(False)
        if not missing and not extra:
            return []
        matched = len(expected) - missing
        if not missing:
            summary = f"All {len(expected)} expected items found, plus {extra} unexpected item(s)"
        elif not extra:
            summary = f"{missing} expected item(s) missing; matched {matched}/{len(expected)}"
        else:
            summary = (
                f"Items differ (any order): matched {matched}/{len(expected)}, "
                f"{missing} missing, {extra} unexpected"
            )
        return [
            Assertion.failure(
                f"{path}_array_values_mismatch",
                summary,
                f"Expected {_shown_list(expected)}, got {_shown_list(actual)}",
            )
        ]

    def in_order(self, actual: Any, expected: Any, path: str, seen: set[int]) -> list[Assertion]:
        failures: list[Assertion] = []
        common = min(len(actual), len(expected))
        wrong = 0
        for index in range(common):
            found = self.values(actual[index], expected[index], f"{path}[{index}]", seen)
            if found:
                wrong += 1
                failures.extend(found)
        if len(actual) != len(expected) or (wrong and not failures):
            failures.append(
                Assertion.failure(
                    f"{path}_array_values_mismatch",
                    f"Items differ (in order): matched {common - wrong}/{len(expected)}",
                    f"Expected {_shown_list(expected)}, got {_shown_list(actual)}",
                )
            )
        return failures
