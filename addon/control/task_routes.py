"""`GET /tasks` and `GET /tasks/{task_id}`: the tasks as an agent may see them (start URLs rendered,
never the evaluators)."""

from __future__ import annotations

from fastapi import APIRouter
from starlette.responses import Response

from webarena_live.control import models
from webarena_live.control.context import Control
from webarena_live.control.dependencies import GUARD
from webarena_live.control.errors import JsonResponse
from webarena_live.control.responses import documented, guarded
from webarena_live.control.views import find_task, task_view

router = APIRouter(prefix="/tasks", tags=["tasks"], dependencies=[GUARD], responses=guarded())


@router.get("", summary="every task, start URLs rendered", responses=documented(models.TaskList))
async def get_tasks(ctx: Control) -> Response:
    tasks = [task_view(ctx.tasks[task_id], ctx.site_map) for task_id in ctx.tasks]
    return JsonResponse({"count": len(tasks), "tasks": tasks})


@router.get("/{task_id}", summary="one task", responses=documented(models.TaskView, 400))
async def get_task(task_id: int, ctx: Control) -> Response:
    return JsonResponse(task_view(find_task(ctx, task_id), ctx.site_map))
