"""The agent's final response: reading it, checking the seed's rules, writing it back officially.

An agent answers with a JSON object (seed `000_...`):

    {"action": "retrieve", "status": "SUCCESS", "results": ["..."], "error_details": null}

The dataset names the same fields `task_type` and `retrieved_data`, and older
agents send `performed_operation`; all three spellings are accepted, values
case-insensitively. The answer may arrive as an object or as text, possibly
wrapped in a ```json fence, as language models like to write it.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict

from webarena_live.evaluator.errors import AgentResponseError
from webarena_live.evaluator.tasks import Status, TaskType

# Field spellings, in order of precedence: the dataset's, the legacy one, the seed's.
TASK_TYPE_FIELDS = ("task_type", "performed_operation", "action")
RETRIEVED_DATA_FIELDS = ("retrieved_data", "results")

_FENCED = re.compile(r"```(?:json)?\s*\n?(.*?)\n?```", re.DOTALL)


@dataclass(frozen=True, slots=True)
class FinalAnswer:
    """An agent's final answer, read once: what it sent, and the document that holds.

    Every step from the finish to the verdict (the seed's rules, the answer-shape
    warnings, the response evaluator, `agent_response.json`) reads `document`, so
    a fenced or JSON-text answer is decoded once, however many steps look at it.
    """

    raw: Any
    """The answer as sent (an object, JSON text, fenced text, None): results show it as `actual`."""
    document: Any
    """What it holds: text is unfenced and parsed as JSON when it is JSON; an empty answer is None."""

    @classmethod
    def read(cls, raw: Any) -> FinalAnswer:
        """`raw` read (an answer already read is returned as it is)."""
        if isinstance(raw, FinalAnswer):
            return raw
        return cls(raw, _document(raw))


def _document(raw: Any) -> Any:
    # Follows the reference: text that is not JSON stays text, and an empty answer (None, "", {}, [],
    # 0, false) becomes None.
    value = raw
    if isinstance(raw, str):
        value = raw.strip()
        fenced = _FENCED.search(raw)
        if fenced:
            value = fenced.group(1).strip()
        with contextlib.suppress(json.JSONDecodeError):
            value = json.loads(value)
    return value or None


def response_document(raw: Any) -> Any:
    """What an answer holds (`FinalAnswer.document`)."""
    return FinalAnswer.read(raw).document


def first_present(document: Mapping[str, Any], names: tuple[str, ...]) -> str | None:
    """The first of `names` that `document` has, or None."""
    return next((name for name in names if name in document), None)


class AgentResponse(BaseModel):
    """A well-formed final answer, whatever field names the agent used."""

    model_config = ConfigDict(frozen=True)

    task_type: TaskType
    status: Status
    retrieved_data: list[Any] | None = None
    error_details: str | None = None

    def to_official_dict(self) -> dict[str, Any]:
        """The answer with the reference's field names, as `agent_response.json` holds it.

        `error_details` is left out when there are none: the reference reads it as text whenever
        the key is present (a task expecting it would turn a null into an error verdict).
        """
        official: dict[str, Any] = {
            "task_type": self.task_type.value,
            "status": self.status.value,
            "retrieved_data": self.retrieved_data,
        }
        if self.error_details is not None:
            official["error_details"] = self.error_details
        return official


def _choice(document: Mapping[str, Any], names: tuple[str, ...], enum: type[TaskType] | type[Status]) -> Any:
    field = first_present(document, names)
    label = " / ".join(names)
    if field is None:
        raise AgentResponseError(f"the response has no {label} field")
    value = document[field]
    if not isinstance(value, str):
        raise AgentResponseError(f"'{field}' must be a string, got {json.dumps(value)}")
    try:
        return enum(value.strip().upper())
    except ValueError:
        allowed = ", ".join(member.value for member in enum)
        raise AgentResponseError(f"'{field}' is {value!r}; expected one of {allowed}") from None


def parse_response(raw: Any) -> AgentResponse:
    """Read an agent's final answer (an object, or JSON text, possibly ```json-fenced).

    Raises `AgentResponseError` saying which field is missing or wrong.
    """
    if isinstance(raw, AgentResponse):
        return raw
    answer = FinalAnswer.read(raw)
    document, raw = answer.document, answer.raw
    if not isinstance(document, Mapping):
        shown = raw if not isinstance(raw, str) or len(raw) < 200 else raw[:200] + "..."
        raise AgentResponseError(f"the response must be a JSON object, got {shown!r}")
    task_type = _choice(document, TASK_TYPE_FIELDS, TaskType)
    status = _choice(document, ("status",), Status)
    data_field = first_present(document, RETRIEVED_DATA_FIELDS)
    data = document[data_field] if data_field else None
    if data is not None and not isinstance(data, list):
        raise AgentResponseError(f"'{data_field}' must be an array or null, got {json.dumps(data)[:200]}")
    details = document.get("error_details")
    if details is not None and not isinstance(details, str):
        raise AgentResponseError(f"'error_details' must be a string or null, got {json.dumps(details)[:200]}")
    return AgentResponse(task_type=task_type, status=status, retrieved_data=data, error_details=details)


def _item_kind(item: Any) -> str:
    if item is None:
        return "null"
    if isinstance(item, bool):
        return "boolean"
    if isinstance(item, int | float):
        return "number"
    if isinstance(item, str):
        return "string"
    if isinstance(item, Mapping):
        return "object"
    return "array" if isinstance(item, list | tuple) else type(item).__name__


def response_warnings(raw: Any) -> list[str]:
    """The seed's rules an answer breaks; they are reported, they never change a verdict.

    - all results items have one type (string, number, boolean, object or null);
    - result objects all have the same keys;
    - navigate and mutate answers have null or empty results.
    """
    document = response_document(raw)
    if not isinstance(document, Mapping):
        return []
    data_field = first_present(document, RETRIEVED_DATA_FIELDS)
    if data_field is None:
        return []
    data = document[data_field]
    warnings: list[str] = []
    if data is not None and not isinstance(data, list):
        return [f"'{data_field}' should be an array or null, got a {_item_kind(data)}"]
    items = data or []
    kinds = sorted({_item_kind(item) for item in items})
    if len(kinds) > 1:
        warnings.append(f"'{data_field}' items should all be of one type, found: {', '.join(kinds)}")
    objects = [item for item in items if isinstance(item, Mapping)]
    if objects:
        first_keys = sorted(objects[0])
        for position, item in enumerate(objects[1:], start=2):
            if sorted(item) != first_keys:
                warnings.append(
                    f"'{data_field}' objects should all have the same keys: object {position} has "
                    f"{sorted(item)}, object 1 has {first_keys}"
                )
                break
    type_field = first_present(document, TASK_TYPE_FIELDS)
    task_type = document.get(type_field) if type_field else None
    if (
        isinstance(task_type, str)
        and task_type.strip().upper() in {TaskType.NAVIGATE, TaskType.MUTATE}
        and items
    ):
        warnings.append(
            f"'{data_field}' should be null or empty for a {task_type.strip().lower()} task, "
            f"got {len(items)} item(s)"
        )
    return warnings
