"""Reading control request bodies: JSON in, or a 400 `ControlError` that names the problem.

Kept apart from the routes (control/app.py) so each bound on untrusted input
— encoding, syntax, nesting depth — is in one place and tested directly.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError
from starlette.requests import Request

# ControlError is control/errors.py's; still importable from here, where it was first
from webarena_live.control.errors import ControlError as ControlError
from webarena_live.control.models import Abandon

_FENCE = "```"

MAX_JSON_DEPTH = 64
"""Deepest nesting of arrays/objects accepted in a control body; an answer needs a handful of levels,
and deeper input would only exhaust the recursion of the JSON parser and of normalization."""
TOO_DEEP = f"JSON nested deeper than {MAX_JSON_DEPTH} levels"


def parse_json_body(body: bytes) -> Any:
    try:
        value = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ControlError(400, "bad_json", f"the request body is not valid JSON: {error}") from None
    except RecursionError:
        raise ControlError(400, "bad_json", TOO_DEEP) from None
    _check_depth(value)
    return value


def parse_final_response(body: bytes) -> Any:
    """The agent's final answer from a finish body: JSON, or text holding a ```json fence."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ControlError(400, "bad_json", f"the request body is not UTF-8: {error}") from None
    if not text.strip():
        raise ControlError(400, "bad_json", "the request body is empty; send the agent's final response")
    try:
        value = json.loads(text)
    except RecursionError:
        raise ControlError(400, "bad_json", TOO_DEEP) from None
    except json.JSONDecodeError as error:
        if _FENCE in text:
            # The response parser reads answers inside a code fence; bound their nesting first.
            if bracket_depth(text) > MAX_JSON_DEPTH:
                raise ControlError(400, "bad_json", TOO_DEEP) from None
            return text
        raise ControlError(400, "bad_json", f"the request body is not valid JSON: {error}") from None
    _check_depth(value)
    return value


def _check_depth(value: Any) -> None:
    """Raise a 400 when parsed JSON nests deeper than MAX_JSON_DEPTH (walked without recursion)."""
    pending = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > MAX_JSON_DEPTH:
            raise ControlError(400, "bad_json", TOO_DEEP)
        pending.extend((child, depth + 1) for child in children)


def bracket_depth(text: str) -> int:
    """The deepest nesting of [ and { in `text`, counting brackets inside strings too (an upper bound)."""
    depth = deepest = 0
    for character in text:
        if character in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif character in "]}":
            depth = max(0, depth - 1)
    return deepest


def parse_abandon(body: bytes) -> Abandon | None:
    """An abandon's body read as JSON whatever its content type, as `POST /sessions` reads its own
    (`curl -d '{"reason": "gave up"}'` sends a form's type): None when empty, else a 400 naming the
    problem."""
    if not body.strip():
        return None
    try:
        return Abandon.model_validate(parse_json_body(body))
    except ValidationError as error:
        where = [f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in error.errors()]
        raise ControlError(400, "bad_request", where) from None


async def abandon_body(request: Request) -> Abandon | None:
    """The abandon route's body (`Depends(abandon_body)`): `parse_abandon` of what was sent."""
    return parse_abandon(await request.body())


ABANDON_BODY_DOC: dict[str, Any] = {
    "requestBody": {
        "required": False,
        "content": {"application/json": {"schema": Abandon.model_json_schema()}},
    }
}
"""The route's `openapi_extra`: the body it reads itself, documented as FastAPI would document it."""
