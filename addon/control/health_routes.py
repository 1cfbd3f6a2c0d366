"""The routes about the proxy itself: `GET /health`, `GET /openapi.json`, `GET /report` (the run in
figures) and the dashboard's plotting script."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from starlette.responses import FileResponse, Response

from webarena_live.control import models
from webarena_live.control.context import Control
from webarena_live.control.errors import JsonResponse
from webarena_live.control.openapi_doc import document_of
from webarena_live.control.responses import GUARDED, documented
from webarena_live.control.run_view import plotly_script, run_figures
from webarena_live.control.views import health

router = APIRouter()


@router.get(
    "/health",
    summary="liveness, version, tasks loaded, sites mapped",
    responses=documented(models.Health, 405),
)
async def get_health(ctx: Control) -> Response:
    return JsonResponse(health(ctx))


@router.get("/openapi.json", summary="this document", responses={200: {"description": "this document"}})
async def get_openapi_document(request: Request) -> Response:
    return JsonResponse(document_of(request.app))


@router.get(
    "/report",
    summary="the run in figures, as `webarena-live report` gives them on the output directory",
    responses=documented(models.RunFigures, 400, 409, *GUARDED),  # 404: an unknown named run
)
async def get_report(
    ctx: Control,
    run: Annotated[str | None, Query(description="a named run: OUT/<run>/")] = None,
) -> Response:
    return JsonResponse(await run_figures(ctx.output_dir, ctx.tasks, run))


@router.get("/dashboard/plotly.min.js", include_in_schema=False)
async def get_plotly() -> Response:
    return FileResponse(plotly_script(), media_type="text/javascript")
