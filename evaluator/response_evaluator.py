"""AgentResponseEvaluator: judge the agent's final answer against the task's expected response.

The task type and status must match (as case-insensitive text); for retrieve
tasks the retrieved data must match too, item by item after normalization by
the task's `results_schema`, in order only when the task says `ordered`.

The verdict reproduces the reference evaluator's, including how it reads odd
answers: text that is not JSON fails, a `status` that is not text is an
error, data sent to a task that expects none is an error when the task's
schema cannot describe it. One deliberate difference: the seed's own field
names `action` and `results` are read like `task_type` and `retrieved_data`
(the reference ignores them, so such answers always fail there).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

from webarena_live.evaluator.compare import compare
from webarena_live.evaluator.errors import AgentResponseError
from webarena_live.evaluator.responses import (
    RETRIEVED_DATA_FIELDS,
    TASK_TYPE_FIELDS,
    FinalAnswer,
    first_present,
)
from webarena_live.evaluator.results import Assertion, EvaluatorResult
from webarena_live.evaluator.tasks import AgentResponseEvaluatorConfig, Task, TaskType
from webarena_live.evaluator.values import DerenderUrl, Text, normalize_list, report

EVALUATOR_NAME = "AgentResponseEvaluator"


def _retrieved_data(
    raw: Any, config: AgentResponseEvaluatorConfig, *, strict: bool, derender_url: DerenderUrl | None
) -> tuple[Any, ...] | None:
    """Retrieved data normalized by the results schema; None when there is none."""
    if not raw and not isinstance(raw, int | float | bool):
        return None
    items = tuple(raw) if isinstance(raw, list | tuple) else (raw,)
    return normalize_list(items, config.results_schema, strict=strict, derender_url=derender_url)


# Normalized expected answers by (config, de-renderer) identity: a task's expected answer is the
# same at every evaluation, so it is normalized once. Bounded; entries keep their config alive,
# so an id is never reused while its entry exists.
_EXPECTED_CACHE: dict[tuple[int, Any], tuple[AgentResponseEvaluatorConfig, Any, dict[str, Any]]] = {}
_EXPECTED_CACHE_SIZE = 4096


def _callable_identity(function: Any) -> Any:
    """A key equal for equivalent de-renderers: callers build a fresh `partial(site_map.derender,
    sites=...)` per evaluation, which should still hit the cache. Cache entries keep the callable
    (and so its bound object) alive, so the ids in a key are never reused while it is cached."""
    if isinstance(function, partial):
        key = (_callable_identity(function.func), function.args, tuple(sorted(function.keywords.items())))
        try:
            hash(key)
        except TypeError:
            return id(function)
        return key
    bound_to, plain = getattr(function, "__self__", None), getattr(function, "__func__", None)
    if bound_to is not None and plain is not None:
        return (id(bound_to), id(plain))
    return id(function)


def expected_response(
    config: AgentResponseEvaluatorConfig, derender_url: DerenderUrl | None = None
) -> dict[str, Any]:
    """The task's expected answer, normalized (raises `NormalizationError` on a broken task)."""
    key = (id(config), _callable_identity(derender_url))
    cached = _EXPECTED_CACHE.get(key)
    if cached is not None and cached[0] is config:
        return cached[2]
    normalized = _normalize_expected(config, derender_url)
    if len(_EXPECTED_CACHE) >= _EXPECTED_CACHE_SIZE:
        _EXPECTED_CACHE.clear()
    _EXPECTED_CACHE[key] = (config, derender_url, normalized)
    return normalized


def _normalize_expected(
    config: AgentResponseEvaluatorConfig, derender_url: DerenderUrl | None
) -> dict[str, Any]:
    expected = config.expected
    return {
        "task_type": Text(expected.task_type.value),
        "status": Text(expected.status.value),
        "retrieved_data": _retrieved_data(
            expected.retrieved_data, config, strict=True, derender_url=derender_url
        ),
    }


def _source_field(field: str, document: Mapping[str, Any]) -> str:
    """Which key of the answer holds `field` (the dataset's name, the legacy one, or the seed's)."""
    if field == "task_type":
        return first_present(document, TASK_TYPE_FIELDS) or field
    if field == "retrieved_data":
        return first_present(document, RETRIEVED_DATA_FIELDS) or field
    return field


def actual_response(
    raw: Any, config: AgentResponseEvaluatorConfig, *, task: Task, derender_url: DerenderUrl | None = None
) -> Any:
    """The agent's answer, normalized like the expected one; non-objects are returned as read."""
    document = FinalAnswer.read(raw).document
    if not isinstance(document, Mapping):
        return document
    normalized: dict[str, Any] = {}
    # Only the fields the task's expected answer spells out are read, as in the reference.
    for field in sorted(config.expected.model_fields_set):
        source = _source_field(field, document)
        if source not in document:
            if field == "retrieved_data":
                normalized[field] = None  # a missing list reads as "no data"
            continue
        value = document[source]
        if field == "retrieved_data":
            is_retrieve = task.task_type == TaskType.RETRIEVE
            data = (
                _retrieved_data(value, config, strict=False, derender_url=derender_url)
                if is_retrieve
                else None
            )
            normalized[field] = data or None
            continue
        if not isinstance(value, str):
            raise AgentResponseError(f"'{source}' must be a string, got {value!r}")
        text = value.strip()
        normalized[field] = Text(text) if text else None
    return normalized


def response_assertions(
    actual: Any, expected: dict[str, Any], config: AgentResponseEvaluatorConfig, *, task: Task
) -> list[Assertion]:
    """Failed checks of a normalized answer against the normalized expected one."""
    failures = compare(
        actual, expected, ordered=False, value_name="agent_response", ignored_keys=("retrieved_data",)
    )
    if not isinstance(actual, Mapping) or not actual or task.task_type != TaskType.RETRIEVE:
        return failures
    expected_data, actual_data = expected["retrieved_data"], actual.get("retrieved_data")
    if expected_data is None and actual_data is None:
        return failures
    if expected_data is None:
        failures.append(
            Assertion.failure(
                "retrieved_data_unexpected", f"Expected no retrieved_data, got {report(actual_data)}"
            )
        )
    elif actual_data is None:
        failures.append(
            Assertion.failure(
                "retrieved_data_missing_or_null",
                f"Expected retrieved_data {report(expected_data)}, got none",
            )
        )
    else:
        failures.extend(
            compare(
                tuple(actual_data), tuple(expected_data), ordered=config.ordered, value_name="retrieved_data"
            )
        )
    return failures


def evaluate_response(
    config: AgentResponseEvaluatorConfig,
    raw_response: Any,
    *,
    task: Task,
    derender_url: DerenderUrl | None = None,
) -> EvaluatorResult:
    """Judge `raw_response` (whatever the agent sent: object, text, None) against `config`.

    Never raises: a response or task that cannot be judged gives an error result.
    `derender_url(url, strict=False)` turns real site URLs inside answers back
    into placeholders (pass the site map's, bound to the task's sites).
    """
    answer = FinalAnswer.read(raw_response)
    expected: Any = None
    actual: Any = None
    try:
        expected = expected_response(config, derender_url)
        actual = actual_response(answer, config, task=task, derender_url=derender_url)
        failures = response_assertions(actual, expected, config, task=task)
    except Exception as error:  # the reference turns any failure to evaluate into an error verdict
        return EvaluatorResult.from_error(
            EVALUATOR_NAME,
            f"cannot evaluate the response of task {task.task_id}: {type(error).__name__}: {error}",
            actual=answer.raw,
            actual_normalized=report(actual),
            expected=report(expected),
        )
    return EvaluatorResult.from_assertions(
        EVALUATOR_NAME,
        failures,
        actual=answer.raw,
        actual_normalized=report(actual),
        expected=report(expected),
    )
