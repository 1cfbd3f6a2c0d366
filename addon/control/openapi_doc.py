"""The control API's OpenAPI document, generated from its routes and models (`GET /openapi.json`)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from webarena_live.control import models


def document_of(app: FastAPI) -> dict[str, Any]:
    """The generated OpenAPI document, without FastAPI's 422 (validation answers 400 here)."""
    if app.openapi_schema is not None:
        return app.openapi_schema
    document = get_openapi(
        title=app.title,
        version=app.version,
        description="Start sessions, watch their traces, post the agent's final response and get the "
        "verdict. Errors are JSON {error, detail} with a 4xx status and change nothing. With a control "
        "token, every route but /health and /openapi.json needs 'Authorization: Bearer <token>'. Requests "
        "from web pages (Origin / Sec-Fetch-Site headers) are refused.",
        routes=app.routes,
    )
    for operations in document["paths"].values():
        for operation in operations.values():
            operation["responses"].pop("422", None)
            content = operation["responses"]["200"].get("content", {})
            if "text/event-stream" in content:  # a stream answers with events only
                content.pop("application/json", None)
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    for unused in ("HTTPValidationError", "ValidationError"):
        schemas.pop(unused, None)
    schemas["StartSession"] = models.StartSession.model_json_schema(
        ref_template="#/components/schemas/{model}"
    )
    schemas["FinalResponse"] = models.FINAL_RESPONSE_SCHEMA
    document["components"]["securitySchemes"] = {"controlToken": {"type": "http", "scheme": "bearer"}}
    app.openapi_schema = document
    return document
