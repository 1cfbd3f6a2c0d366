"""Routes for agents and learners that ask how they are doing, and the dashboard that shows it.

`progress` and `preview` answer from the session's attempt at its task: what each network
evaluator would say now, and the result a finish with a tentative answer
would give now, marked `preview` (nothing finished, nothing written). The
dashboard is a static page with its script and style, shipped as package
data, read-only like every page (control/guard.py).
"""

from __future__ import annotations

import time
from importlib import resources

from fastapi import APIRouter, Request
from starlette.responses import Response
from starlette.staticfiles import StaticFiles

from webarena_live.addresses.headers import INTERFERENCE_HEADER
from webarena_live.control import models
from webarena_live.control.bodies import ControlError, parse_final_response
from webarena_live.control.context import Control, session_in_path
from webarena_live.control.errors import JsonResponse
from webarena_live.control.leasing import interference_of
from webarena_live.control.models import SessionName
from webarena_live.control.responses import GUARDED, documented, json_body
from webarena_live.runs.attempt import Attempt
from webarena_live.runs.finish_outcome import FinishRefused, no_task_detail
from webarena_live.runs.sessions import Session
from webarena_live.runs.settings import SessionState

DASHBOARD = resources.files("webarena_live.control") / "dashboard"
"""The dashboard's page, script and style (package data: a real directory in an installed wheel)."""


def task_attempt(session: Session) -> Attempt:
    """The session's attempt at its task; 409 while it has none (idle traffic only)."""
    if session.task is None:
        raise ControlError(409, "no_task", no_task_detail(session.name))
    return session.attempt


router = APIRouter()


@router.get(
    "/sessions/{session}/progress",
    summary="each network evaluator of the task: satisfied so far, and by which event",
    responses=documented(models.Progress, 409, *GUARDED),
)
async def get_progress(session: SessionName, ctx: Control) -> Response:
    attempt = task_attempt(session_in_path(ctx, session))
    started = time.perf_counter()
    progress = attempt.progress().model_dump(mode="json")
    return JsonResponse(progress, headers=server_timing(started))


@router.post(
    "/sessions/{session}/preview",
    summary="the result a finish with this answer would give now; the session keeps running",
    responses=documented(models.Result, 400, 409, *GUARDED),
    openapi_extra=json_body("FinalResponse"),
)
async def post_preview(session: SessionName, request: Request, ctx: Control) -> Response:
    attempt = task_attempt(session_in_path(ctx, session))
    response = parse_final_response(await request.body())
    started = time.perf_counter()
    try:
        result = attempt.preview(response)
    except FinishRefused as refused:
        raise ControlError(409, refused.reason, refused.detail_body) from None
    found = session_in_path(ctx, session)
    if attempt.state is not SessionState.FINISHED:  # a finished one's is the finish's, kept
        result = result.model_copy(
            update={"interference": interference_of(ctx, found, request.headers.get(INTERFERENCE_HEADER))}
        )
    answer = {**result.to_dict(), **attempt.sites_answered()}  # as the finish would answer it
    return JsonResponse(answer, headers=server_timing(started))


@router.get("/", summary="the live dashboard (HTML)", responses={200: {"content": {"text/html": {}}}})
async def get_dashboard() -> Response:
    return Response(DASHBOARD.joinpath("index.html").read_bytes(), media_type="text/html; charset=utf-8")


def dashboard_files() -> StaticFiles:
    """The page's script and style, mounted at `/dashboard/` (anything else there is a JSON 404)."""
    # Links followed: a development install (strict editable) links each file to the checkout.
    return StaticFiles(directory=str(DASHBOARD), follow_symlink=True)


def server_timing(started: float) -> dict[str, str]:
    """The time the answer took inside the proxy (standard Server-Timing, ms), as the finish reports
    it: agents asking after every step, and the benchmarks, see what the proxy's own share is."""
    return {"Server-Timing": f"total;dur={(time.perf_counter() - started) * 1000:.3f}"}
