"""JSON answers of the control API, and every refusal as `{"error", "detail"}` with its status.

FastAPI's and Starlette's own refusals (validation, unknown route, wrong
method) are mapped to the codes the API has always used, so clients see one
error shape whichever layer refused.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse, Response

from webarena_live.control.bodies import ControlError
from webarena_live.replicas import NoReplica, PoolError

logger = logging.getLogger("webarena_live.control")

JSON_TYPE = "application/json"


class JsonResponse(JSONResponse):
    """Indented JSON with ASCII escapes: captured text may hold lone surrogates (undecodable header
    bytes), and the finish's body must be `eval_result.json` byte for byte."""

    media_type = JSON_TYPE

    def render(self, content: Any) -> bytes:
        return json.dumps(content, indent=2).encode("ascii") + b"\n"


def error_response(status: int, error: str, detail: Any, *, method: str = "", path: str = "") -> JsonResponse:
    if status != 404 or method != "GET":  # polling for a session is not news
        logger.info("refused %s %s: %d %s: %s", method, path, status, error, detail)
    return JsonResponse({"error": error, "detail": detail}, status_code=status)


def validation_detail(errors: Any) -> list[str]:
    """pydantic's errors as `where: what` lines."""
    return [f"{'.'.join(map(str, error['loc'])) or 'body'}: {error['msg']}" for error in errors]


_CODES = {404: "not_found", 405: "method_not_allowed", 413: "too_large"}
_POOL_STATUS = {"no_replica": 503, "reset_failed": 502}
"""The replica pool's refusals as HTTP statuses; any other pool error is the server's (500)."""


def as_control_error(error: PoolError) -> ControlError:
    """A refusal of the replica pool as the control API answers it: `no_replica` is a 503 with
    `Retry-After`, a failed reset of the leased replicas a 502."""
    headers = {"Retry-After": str(error.retry_after)} if isinstance(error, NoReplica) else None
    return ControlError(_POOL_STATUS.get(error.code, 500), error.code, error.detail, headers=headers)


def install_error_handlers(app: FastAPI) -> None:
    async def control_error(request: Request, error: Exception) -> Response:
        if isinstance(error, PoolError):
            error = as_control_error(error)
        assert isinstance(error, ControlError)
        response = error_response(
            error.status, error.error, error.detail, method=request.method, path=request.url.path
        )
        response.headers.update(error.headers)
        return response

    async def invalid(request: Request, error: Exception) -> Response:
        assert isinstance(error, RequestValidationError)
        detail = validation_detail(error.errors())
        return error_response(400, "bad_request", detail, method=request.method, path=request.url.path)

    async def http_error(request: Request, error: Exception) -> Response:
        assert isinstance(error, HTTPException)
        method, path = request.method, request.scope["path"]
        if error.status_code == 404:
            detail = f"no route {method} {path}"
        elif error.status_code == 405:
            detail = f"use {(error.headers or {}).get('Allow', 'another method')}"
        else:
            detail = error.detail
        code = _CODES.get(error.status_code, "bad_request")
        return error_response(error.status_code, code, detail, method=method, path=path)

    async def crashed(request: Request, error: Exception) -> Response:
        # A bug must answer as JSON, not kill the proxy's handler.
        logger.exception("control request %s %s failed", request.method, request.url.path)
        detail = f"{type(error).__name__}: {error}"
        return JsonResponse({"error": "internal_error", "detail": detail}, status_code=500)

    app.add_exception_handler(ControlError, control_error)
    app.add_exception_handler(PoolError, control_error)
    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(Exception, crashed)
