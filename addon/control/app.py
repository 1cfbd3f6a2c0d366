"""The control API as a FastAPI app: small routes over pydantic models, one router per resource, each
carrying its rules (its prefix, the guard as its dependency, the answers it documents): `health_routes`
(public), `task_routes` (`/tasks`), `session_routes` (`/sessions`, with the routes of one session),
`event_routes` (`/events`), `agent_routes` (`/report`), `lease_routes` (the pool's `/mutations`).
`create_app` only assembles them with the middleware and the error handlers (`control/errors.py`: a
route refuses by raising).

Every route is `async`: FastAPI runs plain functions in a thread pool, and the
routes must touch the sessions from the proxy's event loop thread, as capture
does, so nothing needs a lock. Bodies are read raw and parsed by
control/bodies.py (bounded nesting, answers inside a ```json fence, any
Content-Type, as curl's `-d` sends) and then validated by the model; the
models document the bodies in `/openapi.json`.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from webarena_live.control import (
    agent_routes,
    event_routes,
    health_routes,
    lease_routes,
    session_routes,
    task_routes,
)
from webarena_live.control.context import ControlContext
from webarena_live.control.dependencies import refusal_of
from webarena_live.control.errors import JsonResponse, install_error_handlers
from webarena_live.control.health_routes import dashboard_files
from webarena_live.control.middleware import BodyCap, CommonHeaders, RawPath
from webarena_live.control.openapi_doc import document_of
from webarena_live.control.session_routes import finish
from webarena_live.control.streams import Streams
from webarena_live.evaluator import __version__

__all__ = ["create_app", "finish", "openapi_document"]

ROUTERS = (health_routes, task_routes, session_routes, event_routes, agent_routes, lease_routes)
"""Each resource's module-level router, in the order the document lists them."""


def create_app(control: ControlContext | None) -> FastAPI:
    """The control API over `control` (None: an app that only documents itself, `openapi_document`)."""
    app = FastAPI(
        title="webarena-live control API", version=__version__, openapi_url=None, docs_url=None,
        redoc_url=None, default_response_class=JsonResponse, redirect_slashes=False,
    )  # fmt: skip
    app.state.control = control
    app.state.streams = Streams()
    install_error_handlers(app, before_routing=refusal_of)  # no route or method: the guard's word first
    for middleware in (BodyCap, RawPath, CommonHeaders):  # the last added runs first
        app.add_middleware(middleware)
    for module in ROUTERS:
        app.include_router(module.router)
    app.mount("/dashboard", dashboard_files())
    return app


def openapi_document(app: FastAPI | None = None) -> dict[str, Any]:
    """The generated OpenAPI document of `app` (by default an app that only documents itself)."""
    return document_of(app or create_app(None))
