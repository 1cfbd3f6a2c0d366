"""The control API (DESIGN §6) described as an OpenAPI 3.0 document, served at `/openapi.json`.

Written as data, next to the routes in `addon.control`; the fuzz test
(tests/test_openapi_fuzz.py) drives a running proxy from this document, so a
route that drifts from it shows up as a failing check.
"""

from __future__ import annotations

from typing import Any

from webarena_live.evaluator import __version__

_JSON = "application/json"


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {_JSON: {"schema": schema}}}


def _errors(*statuses: int) -> dict[str, Any]:
    reasons = {
        400: "malformed request (not JSON, wrong types, missing or unknown fields)",
        401: "control token missing or wrong",
        403: "the request came from a web page",
        404: "unknown task, session or route",
        405: "method not allowed on this route",
        409: "the session cannot do that now (finished, no task, no events)",
        413: "request body over 10 MB",
        507: "the outputs could not be written",
    }
    return {str(status): _json(_ref("Error"), reasons[status]) for status in statuses}


# Every route but the public ones can answer these.
_GUARDED = (401, 403, 404, 405, 413)

_SESSION_NAME = {
    "name": "session",
    "in": "path",
    "required": True,
    "description": "session name (the proxy-credentials username), percent-encoded",
    "schema": {"type": "string", "minLength": 1, "maxLength": 128},
}
_SINCE = {
    "name": "since",
    "in": "query",
    "required": False,
    "description": "first event index to return",
    "schema": {"type": "integer"},
}

_SCHEMAS: dict[str, Any] = {
    "Error": {
        "type": "object",
        "required": ["error", "detail"],
        "properties": {"error": {"type": "string"}, "detail": {}},
    },
    "Health": {
        "type": "object",
        "required": ["status", "version", "tasks"],
        "properties": {
            "status": {"type": "string"},
            "version": {"type": "string"},
            "tasks": {"type": "integer"},
        },
    },
    "TaskView": {
        "type": "object",
        "required": ["task_id", "intent", "start_urls", "sites"],
        "properties": {
            "task_id": {"type": "integer"},
            "intent_template_id": {"type": "integer"},
            "sites": {"type": "array", "items": {"type": "string"}},
            "intent": {"type": "string"},
            "start_urls": {"type": "array", "items": {"type": "string"}},
            "revision": {"type": "integer"},
        },
    },
    "TaskList": {
        "type": "object",
        "required": ["count", "tasks"],
        "properties": {"count": {"type": "integer"}, "tasks": {"type": "array", "items": _ref("TaskView")}},
    },
    "StartSession": {
        "type": "object",
        "required": ["task_id"],
        "additionalProperties": False,
        "properties": {
            "task_id": {"type": "integer"},
            "session": {"type": "string", "minLength": 1, "maxLength": 128},
            "run": {
                "type": "string",
                "pattern": r"^(?!\d+$)[A-Za-z0-9][A-Za-z0-9._-]{0,99}$",
                "description": "the run directory the outputs go to: OUT/<run>/<task_id>/",
            },
            "restart": {
                "type": "boolean",
                "description": "discard the events of a running session instead of answering 409",
            },
            "resume_journal": {
                "type": "boolean",
                "description": "start with the events of this session's newest journal for the task "
                "(after a proxy restart)",
            },
        },
    },
    "Started": {
        "type": "object",
        "required": ["session", "state", "task_id", "intent", "start_urls", "sites"],
        "properties": {
            "session": {"type": "string"},
            "state": {"type": "string"},
            "task_id": {"type": "integer"},
            "intent": {"type": "string"},
            "start_urls": {"type": "array", "items": {"type": "string"}},
            "sites": {"type": "array", "items": {"type": "string"}},
            "resumed_events": {"type": "integer"},
        },
    },
    "SessionState": {
        "type": "object",
        "required": ["session", "state", "counts"],
        "properties": {
            "session": {"type": "string"},
            "state": {"type": "string", "enum": ["idle", "running", "finished"]},
            "task_id": {"type": "integer", "nullable": True},
            "counts": {"type": "object"},
        },
    },
    "SessionList": {
        "type": "object",
        "required": ["sessions"],
        "properties": {"sessions": {"type": "array", "items": _ref("SessionState")}},
    },
    "Trace": {
        "type": "object",
        "required": ["session", "count", "events"],
        "properties": {
            "session": {"type": "string"},
            "count": {"type": "integer"},
            "events": {"type": "array", "items": {"type": "object"}},
        },
    },
    "FinalResponse": {
        "description": "the agent's final response: a JSON object (seed or dataset field names), or text "
        "holding one inside a ```json fence",
    },
    "Result": {
        "type": "object",
        "required": ["task_id", "status", "score", "evaluators_results"],
        "properties": {
            "task_id": {"type": "integer"},
            "status": {"type": "string", "enum": ["success", "failure", "error"]},
            "score": {"type": "number"},
            "evaluators_results": {"type": "array", "items": {"type": "object"}},
        },
    },
    "Har": {
        "type": "object",
        "required": ["log"],
        "properties": {"log": {"type": "object", "required": ["version", "entries"]}},
    },
}


def _get(summary: str, schema: str, *errors: int, parameters: list[Any] | None = None) -> dict[str, Any]:
    operation: dict[str, Any] = {
        "summary": summary,
        "responses": {"200": _json(_ref(schema), summary), **_errors(*errors)},
    }
    if parameters:
        operation["parameters"] = parameters
    return operation


def openapi_document() -> dict[str, Any]:
    """The control API as an OpenAPI 3.0.3 document (a fresh dict each call)."""
    task_id = {"name": "task_id", "in": "path", "required": True, "schema": {"type": "integer"}}
    stream = {
        "description": "Server-Sent Events",
        "content": {"text/event-stream": {"schema": {"type": "string"}}},
    }
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "webarena-live control API",
            "version": __version__,
            "description": "Start sessions, watch their traces, post the agent's final response and get "
            "the verdict. Errors are JSON {error, detail} with a 4xx status and change nothing. With a "
            "control token, every route but /health and /openapi.json needs 'Authorization: Bearer "
            "<token>'. Requests from web pages (Origin / Sec-Fetch-Site headers) are refused.",
        },
        "paths": {
            "/health": {"get": _get("liveness, version, number of tasks loaded", "Health", 405)},
            "/openapi.json": {
                "get": {"summary": "this document", "responses": {"200": _json({}, "OpenAPI")}}
            },
            "/tasks": {"get": _get("every task, start URLs rendered", "TaskList", *_GUARDED)},
            "/tasks/{task_id}": {
                "get": _get("one task", "TaskView", 400, *_GUARDED, parameters=[task_id]),
            },
            "/sessions": {
                "get": _get("every session", "SessionList", *_GUARDED),
                "post": {
                    "summary": "start (or restart, clearing its trace) a session on a task",
                    "requestBody": {"required": True, "content": {_JSON: {"schema": _ref("StartSession")}}},
                    "responses": {"200": _json(_ref("Started"), "the session"), **_errors(400, *_GUARDED)},
                },
            },
            "/sessions/{session}": {
                "get": _get(
                    "state, task, event counts", "SessionState", *_GUARDED, parameters=[_SESSION_NAME]
                ),
            },
            "/sessions/{session}/trace": {
                "get": _get(
                    "events captured so far", "Trace", 400, *_GUARDED, parameters=[_SESSION_NAME, _SINCE]
                ),
            },
            "/sessions/{session}/events": {
                "get": {
                    "summary": "Server-Sent Events: the events so far, then each as it is captured, "
                    "then the verdict",
                    "parameters": [_SESSION_NAME, _SINCE],
                    "responses": {"200": stream, **_errors(400, *_GUARDED)},
                }
            },
            "/sessions/{session}/finish": {
                "post": {
                    "summary": "evaluate the agent's final response against the session's trace",
                    "parameters": [_SESSION_NAME],
                    "requestBody": {"required": True, "content": {_JSON: {"schema": _ref("FinalResponse")}}},
                    "responses": {
                        "200": _json(_ref("Result"), "the verdict"),
                        **_errors(400, 409, 507, *_GUARDED),
                    },
                }
            },
            "/sessions/{session}/har": {
                "get": _get("the trace as a HAR 1.2 document", "Har", *_GUARDED, parameters=[_SESSION_NAME]),
            },
        },
        "components": {
            "schemas": _SCHEMAS,
            "securitySchemes": {"controlToken": {"type": "http", "scheme": "bearer"}},
        },
    }
