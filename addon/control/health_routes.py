"""The public routes, about the proxy itself: `GET /health`, `GET /openapi.json`, and the live dashboard
(`GET /`, its plotting script, its script and style under `/dashboard/`), a static page shipped as
package data, read-only like every page (control/guard.py). No token, no page check (they reveal
nothing about sessions): the guard lets them through (`is_public`)."""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter, Request
from starlette.responses import FileResponse, Response
from starlette.staticfiles import StaticFiles

from webarena_live.control import models
from webarena_live.control.context import Control
from webarena_live.control.dependencies import GUARD
from webarena_live.control.errors import JsonResponse
from webarena_live.control.openapi_doc import document_of
from webarena_live.control.responses import documented
from webarena_live.control.run_view import plotly_script
from webarena_live.control.views import health

DASHBOARD = resources.files("webarena_live.control") / "dashboard"
"""The dashboard's page, script and style (package data: a real directory in an installed wheel)."""

router = APIRouter(tags=["health"], dependencies=[GUARD])


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


@router.get("/", summary="the live dashboard (HTML)", responses={200: {"content": {"text/html": {}}}})
async def get_dashboard() -> Response:
    return Response(DASHBOARD.joinpath("index.html").read_bytes(), media_type="text/html; charset=utf-8")


@router.get("/dashboard/plotly.min.js", include_in_schema=False)
async def get_plotly() -> Response:
    return FileResponse(plotly_script(), media_type="text/javascript")


def dashboard_files() -> StaticFiles:
    """The page's script and style, mounted at `/dashboard/` (anything else there is a JSON 404)."""
    # Links followed: a development install (strict editable) links each file to the checkout.
    return StaticFiles(directory=str(DASHBOARD), follow_symlink=True)
