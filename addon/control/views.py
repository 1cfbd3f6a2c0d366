"""What the control API shows: a task as an agent may see it, `/health`, the sessions listed."""

from __future__ import annotations

from typing import Any

from webarena_live.control.bodies import ControlError
from webarena_live.control.context import ControlContext
from webarena_live.evaluator import (
    ANSWER_STATUSES,
    ANSWER_TASK_TYPES,
    REFERENCE_VERSION,
    SiteMap,
    Task,
    UnknownTaskError,
    WebArenaLiveError,
    __version__,
)
from webarena_live.runs.recovery import resumable_runs


def render_url(site_map: SiteMap, template: str, sites: tuple[str, ...]) -> str:
    """A start URL with real base URLs; placeholders the site map cannot fill stay as they are."""
    try:
        return site_map.render(template, sites=sites, strict=False)
    except WebArenaLiveError:
        return template


def task_view(task: Task, site_map: SiteMap) -> dict[str, Any]:
    """What an agent may see of a task: never the evaluators (they hold the expected answer), but the
    shape its final answer must have: `results_schema` and the `task_type` and `status` values the
    answer may give."""
    return {
        "task_id": task.task_id,
        "intent_template_id": task.intent_template_id,
        "sites": list(task.sites),
        "intent": task.intent,
        "start_urls": [render_url(site_map, url, task.sites) for url in task.start_urls],
        "revision": task.revision,
        "results_schema": task.response_config.results_schema,
        "answer": {"task_type": list(ANSWER_TASK_TYPES), "status": list(ANSWER_STATUSES)},
    }


def find_task(ctx: ControlContext, task_id: int) -> Task:
    try:
        return ctx.tasks[task_id]
    except UnknownTaskError as error:
        raise ControlError(404, "unknown_task", str(error)) from None


def health(ctx: ControlContext) -> dict[str, Any]:
    return {
        "status": "ok",
        "version": __version__,
        "reference_version": REFERENCE_VERSION,
        "tasks": len(ctx.tasks),
        "tasks_source": ctx.tasks.source,
        "sessions": len(ctx.sessions),
        "output_dir": str(ctx.output_dir) if ctx.output_dir else None,
        "journal_dir": str(ctx.settings.journal_dir) if ctx.settings.journal_dir else None,
        "refused_page_requests": ctx.refused_page_requests,
        "control_token": bool(ctx.token),
        "redact": ctx.settings.redact,
        "sites": {name: list(urls) for name, urls in ctx.site_map.urls.items()},
        **ctx.authority.health(),
        **ctx.extra_health,
    }


def list_sessions(ctx: ControlContext) -> list[dict[str, Any]]:
    """The live sessions, then unfinished runs found in the journals (resumable after a restart)."""
    live = [session.describe() for session in ctx.sessions]
    own = {session.attempt.journal.path for session in ctx.sessions if session.attempt.journal is not None}
    return live + resumable_runs(ctx.settings.journal_dir, skip=own)
