"""JSON answers of the control API, and every refusal as `{"error", "detail"}` with its status.

A route refuses by raising: a `ControlError` (or one of its kinds below, each with its status) from
anywhere under the route, and the one handler `install_error_handler` registers renders it — in one
process (`control/app.py`) and at a fleet's front (`fleet/front/app.py`) alike. FastAPI's and
Starlette's own refusals (validation, unknown route, wrong method) are mapped to the codes the API has
always used (`install_error_handlers`), so clients see one error shape whichever layer refused.
"""

from __future__ import annotations

import json
import logging
from typing import Any, ClassVar

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse, Response

from webarena_live.evaluator import WebArenaLiveError
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
    """A refusal rendered on the spot, where no handler is around it (a pure ASGI middleware)."""
    _logged(status, error, detail, method, path)
    return JsonResponse({"error": error, "detail": detail}, status_code=status)


def _logged(status: int, error: str, detail: Any, method: str, path: str) -> None:
    if status != 404 or method != "GET":  # polling for a session is not news
        logger.info("refused %s %s: %d %s: %s", method, path, status, error, detail)


class ControlError(WebArenaLiveError):
    """A control request that cannot be served; the handler answers it as JSON with `status`."""

    def __init__(
        self, status: int, error: str, detail: Any = None, *, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(f"{status} {error}: {detail}")
        self.status = status
        self.error = error
        self.detail = detail
        self.headers = headers or {}
        """Headers the reply carries too (`Retry-After` on a 503)."""

    def body(self) -> dict[str, Any]:
        return {"error": self.error, "detail": self.detail}

    def response(self, request: Request) -> Response:
        """The answer to `request`, logged as every refusal is (`error_response`)."""
        _logged(self.status, self.error, self.detail, request.method, request.url.path)
        answer = JsonResponse(self.body(), status_code=self.status)
        answer.headers.update(self.headers)
        return answer


class _Kind(ControlError):
    """A refusal whose status its kind says: `Conflict("no_task", detail)`."""

    STATUS: ClassVar[int]

    def __init__(self, error: str, detail: Any = None, *, headers: dict[str, str] | None = None) -> None:
        super().__init__(self.STATUS, error, detail, headers=headers)


class BadRequest(_Kind):
    STATUS = 400


class Unauthorized(_Kind):
    STATUS = 401


class PageRefused(_Kind):
    """A request a web page started (control/guard.py)."""

    STATUS = 403


class NotFound(_Kind):
    STATUS = 404


class MethodNotAllowed(_Kind):
    STATUS = 405


class Conflict(_Kind):
    """The session (or the proxy) cannot do that now."""

    STATUS = 409


class Gone(_Kind):
    STATUS = 410


class TooLarge(_Kind):
    STATUS = 413


class Unavailable(_Kind):
    STATUS = 503


class WorkerRefusal(ControlError):
    """A fleet's front answering for a worker that cannot (restarting, silent, too slow): the body names
    the worker and its node, and the client may retry (`Retry-After`)."""

    def __init__(
        self, status: int, error: str, detail: str, *, worker: int, node: str | None, retry_after: int
    ) -> None:
        super().__init__(status, error, detail, headers={"Retry-After": str(retry_after)})
        self.worker, self.node = worker, node

    def body(self) -> dict[str, Any]:
        return {**super().body(), "worker": self.worker, "node": self.node}


class Relayed(ControlError):
    """A refusal some other control API gave (a fleet's worker), passed on to the client as it came."""

    def __init__(self, status: int, content: bytes, headers: dict[str, str]) -> None:
        super().__init__(status, "relayed", None, headers=headers)
        self.content = content

    def response(self, request: Request) -> Response:
        return Response(self.content, self.status, headers=self.headers)


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


def install_error_handler(app: FastAPI) -> None:
    """The one handler of every refusal a route raises (`ControlError`, and the pool's `PoolError`)."""

    async def control_error(request: Request, error: Exception) -> Response:
        if isinstance(error, PoolError):
            error = as_control_error(error)
        assert isinstance(error, ControlError)
        return error.response(request)

    app.add_exception_handler(ControlError, control_error)
    app.add_exception_handler(PoolError, control_error)


def install_error_handlers(app: FastAPI, *, before_routing: Any = None) -> None:
    """`install_error_handler`, and FastAPI's and Starlette's refusals in the same shape.

    `before_routing(request)`: the refusal that comes before "no such route" or "wrong method" (the
    guard's, control/dependencies.py), or None."""
    install_error_handler(app)

    async def invalid(request: Request, error: Exception) -> Response:
        assert isinstance(error, RequestValidationError)
        detail = validation_detail(error.errors())
        return error_response(400, "bad_request", detail, method=request.method, path=request.url.path)

    async def http_error(request: Request, error: Exception) -> Response:
        assert isinstance(error, HTTPException)
        if before_routing is not None and (refusal := before_routing(request)) is not None:
            return refusal.response(request)
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

    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(Exception, crashed)
