"""What the control API's routers carry besides their paths (FastAPI dependencies): the guard every
router depends on, and the session a `/sessions/{session}/…` route names.

The guard (control/guard.py) runs before anything a route reads, and before "no such route" and "wrong
method" too (`refusal_of`, which control/app.py gives the error handlers): a request without its token
learns nothing, not even which paths exist.
"""

from __future__ import annotations

import logging
from typing import Annotated, Any
from urllib.parse import unquote

from fastapi import Depends, Request

from webarena_live.control.context import Control, find_session, session_in_path
from webarena_live.control.errors import ControlError, PageRefused
from webarena_live.control.guard import refusal
from webarena_live.control.models import SessionName
from webarena_live.runs.sessions import Session

logger = logging.getLogger("webarena_live.control")


def refusal_of(request: Request) -> ControlError | None:
    """The guard's refusal of `request` (a page's request is counted and logged), or None."""
    method, path = request.method, request.scope["path"]
    headers = {name.lower(): value for name, value in request.headers.items()}
    control: Any = request.app.state.control
    refused = refusal(method, path, headers, lambda: control.token)
    if isinstance(refused, PageRefused):
        control.refused_page_requests += 1
        logger.warning("refused a control request from a web page: %s %s: %s", method, path, refused.detail)
    return refused


async def guard(request: Request) -> None:
    """The dependency of every router: raises the guard's refusal."""
    if (refused := refusal_of(request)) is not None:
        raise refused


GUARD = Depends(guard)
"""`APIRouter(dependencies=[GUARD])`."""


async def _named(session: SessionName, ctx: Control) -> Session:
    return find_session(ctx, unquote(session))


async def _used(session: SessionName, ctx: Control) -> Session:
    return session_in_path(ctx, session)


PathSession = Annotated[Session, Depends(_used)]
"""The session the path names (404 `unknown_session` when there is none); asking of it is a use of its
lease (`note_use`)."""

NamedSession = Annotated[Session, Depends(_named)]
"""The session the path names, the call not counted as a use of its lease (what ends the lease)."""
