"""Answer-shape feedback: where a final answer departs from the response schema and the task's results schema.

The seed specifies the final answer as a JSON object (an action, a status,
results, optional error details), and every dataset task says in
`results_schema` (a JSON Schema document) what its results look like. An agent
that answers "twelve" where a number is asked may still be judged right — the
value types normalize generously — or wrong; either way it should be told what
shape was expected while it can still fix the answer. `shape_warnings` runs
`jsonschema` on the answer, under whatever field names the agent used, and
returns one line per violation: the JSON pointer of the offending value and
the validator's message. Warnings never change a verdict.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from webarena_live.evaluator.responses import RETRIEVED_DATA_FIELDS, TASK_TYPE_FIELDS, first_present
from webarena_live.evaluator.tasks import Status, TaskType


def _one_of_ignoring_case(words: list[str]) -> dict[str, Any]:
    return {"type": "string", "pattern": f"(?i)^\\s*({'|'.join(words)})\\s*$"}


def response_schema(type_field: str, data_field: str) -> dict[str, Any]:
    """The seed's response schema, under the field names the agent used (values case-insensitive)."""
    return {
        "type": "object",
        "required": [type_field, "status", data_field],
        "properties": {
            type_field: _one_of_ignoring_case([t.value for t in TaskType]),
            "status": _one_of_ignoring_case([s.value for s in Status]),
            data_field: {"type": ["array", "null"]},
            "error_details": {"type": ["string", "null"]},
        },
    }


@functools.lru_cache(maxsize=16)
def _response_schema(type_field: str, data_field: str) -> Mapping[str, Any]:
    return response_schema(type_field, data_field)  # one object per spelling, so its validator is kept


def _pointer(path: Any) -> str:
    return "/".join(str(part) for part in path) or "(answer)"


_VALIDATORS: dict[int, tuple[Mapping[str, Any], Draft202012Validator]] = {}
"""Validators by the identity of their schema (tasks keep theirs for the life of the task set)."""


def _validator(schema: Mapping[str, Any]) -> Draft202012Validator:
    cached = _VALIDATORS.get(id(schema))
    if cached is None or cached[0] is not schema:
        if len(_VALIDATORS) > 4096:
            _VALIDATORS.clear()
        Draft202012Validator.check_schema(schema)
        cached = _VALIDATORS[id(schema)] = (schema, Draft202012Validator(schema))
    return cached[1]


def _violations(schema: Mapping[str, Any], value: Any, prefix: tuple[Any, ...] = ()) -> list[str]:
    try:
        errors = sorted(_validator(schema).iter_errors(value), key=lambda e: list(e.absolute_path))
    except SchemaError as error:  # a task's results_schema we cannot use: say so, once
        return [f"the task's results_schema is not a valid JSON Schema: {error.message}"]
    return [f"{_pointer((*prefix, *error.absolute_path))}: {error.message}" for error in errors]


def shape_warnings(document: Any, results_schema: Mapping[str, Any] | None) -> list[str]:
    """Violations of the response schema and of the task's `results_schema`, one line each.

    `document` is the parsed answer (see `responses.response_document`). Empty
    results stand for null where the task's schema asks for null, as the seed
    allows for navigate and mutate answers.
    """
    if not isinstance(document, Mapping):
        return [f"(answer): the answer should be a JSON object, got {type(document).__name__}"]
    type_field = first_present(document, TASK_TYPE_FIELDS) or "action"
    data_field = first_present(document, RETRIEVED_DATA_FIELDS) or "results"
    warnings = _violations(_response_schema(type_field, data_field), document)
    if results_schema and data_field in document:
        data = document[data_field]
        if data == [] and results_schema.get("type") == "null":
            data = None
        warnings += _violations(results_schema, data, (data_field,))
    return warnings
