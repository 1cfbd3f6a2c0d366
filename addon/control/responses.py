"""What the control API's routes document in `/openapi.json` besides their models: the error answers
each may give, and the request bodies read raw (control/bodies.py) that the document still names."""

from __future__ import annotations

from typing import Any

from webarena_live.control import models

ERRORS = {
    400: "malformed request (not JSON, wrong types, missing or unknown fields)",
    401: "control token missing or wrong",
    403: "the request came from a web page",
    404: "unknown task, session or route",
    405: "method not allowed on this route",
    409: "the session cannot do that now (running, finished, no task, no events, no reset_url); no output "
    "directory, or one holding named runs only (GET /report)",
    413: "request body over 10 MiB",
    502: "a site's reset failed (each site's outcome in the detail); the session did not start",
    503: "no replica is free for the task within `wait` (Retry-After), no proxy address is free for the "
    "session (--session-ports used up), or its worker is restarting",
    507: "the outputs could not be written",
}
GUARDED = (401, 403, 404, 405, 413)
"""What every route but the public ones can answer."""


def guarded() -> dict[int | str, dict[str, Any]]:
    """`APIRouter(responses=guarded())`: the `GUARDED` answers, documented on each of its routes."""
    return {status: {"model": models.ErrorBody, "description": ERRORS[status]} for status in GUARDED}


def documented(model: type[Any], *errors: int) -> dict[int | str, dict[str, Any]]:
    """A route's responses: `model` on 200, the JSON error body on each of `errors`."""
    responses: dict[int | str, dict[str, Any]] = {200: {"model": model}}
    for status in errors:
        responses[status] = {"model": models.ErrorBody, "description": ERRORS[status]}
    return responses


def stream(*errors: int) -> dict[int | str, dict[str, Any]]:
    """A Server-Sent Events route's responses."""
    responses = documented(models.ErrorBody, *errors)
    responses[200] = {"content": {"text/event-stream": {"schema": {"type": "string"}}}}
    return responses


def json_body(schema_name: str) -> dict[str, Any]:
    """`openapi_extra` for a route that reads its body raw: the schema the document names for it."""
    schema = {"$ref": f"#/components/schemas/{schema_name}"}
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}
