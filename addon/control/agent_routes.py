"""Routes for agents and learners that ask how they are doing: `GET /report` (the run in figures, what
the dashboard plots), and of their session, `progress` and `preview` (under `/sessions/{session}/`:
`session_routes` includes `of_session`).

`progress` and `preview` answer from the session's attempt at its task: what each network
evaluator would say now, and the result a finish with a tentative answer
would give now, marked `preview` (nothing finished, nothing written).
"""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from webarena_live.addresses.headers import INTERFERENCE_HEADER
from webarena_live.control import models
from webarena_live.control.bodies import parse_final_response
from webarena_live.control.context import Control
from webarena_live.control.dependencies import GUARD, PathSession
from webarena_live.control.errors import Conflict, JsonResponse
from webarena_live.control.responses import documented, guarded, json_body
from webarena_live.control.run_view import run_figures
from webarena_live.runs.attempt import Attempt
from webarena_live.runs.finish_outcome import FinishRefused, no_task_detail
from webarena_live.runs.sessions import Session
from webarena_live.runs.settings import SessionState


def task_attempt(session: Session) -> Attempt:
    """The session's attempt at its task; 409 while it has none (idle traffic only)."""
    if session.task is None:
        raise Conflict("no_task", no_task_detail(session.name))
    return session.attempt


router = APIRouter(tags=["agents"], dependencies=[GUARD], responses=guarded())


@router.get(
    "/report",
    summary="the run in figures, as `webarena-live report` gives them on the output directory",
    responses=documented(models.RunFigures, 400, 409),  # 404: an unknown named run
)
async def get_report(
    ctx: Control,
    run: Annotated[str | None, Query(description="a named run: OUT/<run>/")] = None,
) -> Response:
    return JsonResponse(await run_figures(ctx.output_dir, ctx.tasks, run))


of_session = APIRouter(prefix="/{session}")
"""The routes of one session, under the sessions' router (and its guard)."""


@of_session.get(
    "/progress",
    summary="each network evaluator of the task: satisfied so far, and by which event",
    responses=documented(models.Progress, 409),
)
async def get_progress(found: PathSession) -> Response:
    attempt = task_attempt(found)
    started = time.perf_counter()
    progress = attempt.progress().model_dump(mode="json")
    return JsonResponse(progress, headers=server_timing(started))


@of_session.post(
    "/preview",
    summary="the result a finish with this answer would give now; the session keeps running",
    responses=documented(models.Result, 400, 409),
    openapi_extra=json_body("FinalResponse"),
)
async def post_preview(found: PathSession, request: Request, ctx: Control) -> Response:
    attempt = task_attempt(found)
    response = parse_final_response(await request.body())
    started = time.perf_counter()
    try:
        result = attempt.preview(response)
    except FinishRefused as refused:
        raise Conflict(refused.reason, refused.detail_body) from None
    if attempt.state is not SessionState.FINISHED:  # a finished one's is the finish's, kept
        given = request.headers.get(INTERFERENCE_HEADER)  # a fleet's front names it
        result = result.model_copy(update={"interference": ctx.authority.interference(found, given).view()})
    answer = {**result.to_dict(), **attempt.sites_answered()}  # as the finish would answer it
    return JsonResponse(answer, headers=server_timing(started))


def server_timing(started: float) -> dict[str, str]:
    """The time the answer took inside the proxy (standard Server-Timing, ms), as the finish reports
    it: agents asking after every step, and the benchmarks, see what the proxy's own share is."""
    return {"Server-Timing": f"total;dur={(time.perf_counter() - started) * 1000:.3f}"}
