"""One task, one verdict: run every evaluator of a task on a response and a trace.

This is the orchestration the live addon and the offline batch share. It never
raises on bad input: an evaluator that fails becomes an `error` evaluator
result, and a run that cannot be evaluated at all (no site map and nothing in
the trace to guess one from) becomes an `error` task result, which is how the
reference scores such runs.
"""

from __future__ import annotations

import functools
from typing import Any

from webarena_live.evaluator.answer_shape import shape_warnings
from webarena_live.evaluator.errors import WebArenaLiveError
from webarena_live.evaluator.network_evaluator import evaluate_network
from webarena_live.evaluator.response_evaluator import evaluate_response
from webarena_live.evaluator.responses import FinalAnswer, response_warnings
from webarena_live.evaluator.results import EvaluatorResult, TaskResult
from webarena_live.evaluator.sites import SiteMap
from webarena_live.evaluator.tasks import AgentResponseEvaluatorConfig, NetworkEventEvaluatorConfig, Task
from webarena_live.evaluator.trace import NetworkTrace


def task_fields(task: Task) -> dict[str, Any]:
    """The identifying fields every result of `task` carries."""
    return {
        "task_id": task.task_id,
        "intent_template_id": task.intent_template_id,
        "sites": task.sites,
        "task_revision": task.revision,
    }


def _warnings_for(answer: FinalAnswer, task: Task) -> tuple[str, ...] | None:
    # Warnings are advice about the answer's shape (the seed's rules, the response schema and the
    # task's results_schema); they never change a verdict, and a failure to produce them is no error.
    try:
        found = response_warnings(answer)
        found += shape_warnings(answer.document, task.response_config.results_schema)
    except Exception:
        return None
    return tuple(dict.fromkeys(found)) or None


def _site_map_for(task: Task, trace: NetworkTrace, site_map: SiteMap) -> SiteMap:
    """The site map to evaluate with, completed from the trace when it lacks a task's site.

    Raises `WebArenaLiveError` when the map lacks a site and the trace offers no
    event to take a base URL from.
    """
    return site_map.complete_from_trace(task.sites, trace)


def _run_one(
    config: AgentResponseEvaluatorConfig | NetworkEventEvaluatorConfig,
    *,
    task: Task,
    answer: FinalAnswer,
    trace: NetworkTrace,
    site_map: SiteMap,
) -> EvaluatorResult:
    name = config.evaluator
    try:
        if isinstance(config, AgentResponseEvaluatorConfig):
            derender = functools.partial(site_map.derender, sites=task.sites)
            return evaluate_response(config, answer, task=task, derender_url=derender)
        return evaluate_network(config, trace, task=task, site_map=site_map)
    except Exception as error:  # an evaluator bug or unforeseen input scores as an error, like the reference
        detail = (
            f"{type(error).__name__}: {error}" if not isinstance(error, WebArenaLiveError) else str(error)
        )
        return EvaluatorResult.from_error(name, f"{name} could not evaluate task {task.task_id}: {detail}")


def evaluate_task(
    task: Task,
    response: Any,
    trace: NetworkTrace,
    *,
    site_map: SiteMap,
    data_checksum: str | None = None,
) -> TaskResult:
    """Score one agent run of `task`.

    `response` is whatever the agent sent as its final answer (a dict, JSON
    text possibly inside a code fence, None, ...), or that answer already read
    (`FinalAnswer`). Evaluators run in the order the task lists them; the task
    succeeds only when all of them do.
    """
    fields = {**task_fields(task), "webarena_verified_data_checksum": data_checksum}
    answer = FinalAnswer.read(response)
    warnings = _warnings_for(answer, task)
    if not len(trace):
        # The reference cannot load a trace without events and scores the run as an error,
        # even for tasks that only check the response; the verdict must be the same.
        return TaskResult.from_error(
            message=f"task {task.task_id}: the network trace has no events (the reference scores an empty "
            "trace as an error)",
            warnings=warnings,
            **fields,
        )
    try:
        effective_map = _site_map_for(task, trace, site_map)
    except Exception as error:
        return TaskResult.from_error(
            message=f"task {task.task_id}: cannot map its sites {list(task.sites)} to URLs: {error}",
            warnings=warnings,
            **fields,
        )
    results = [
        _run_one(config, task=task, answer=answer, trace=trace, site_map=effective_map)
        for config in task.eval
    ]
    return TaskResult.from_evaluators(evaluators_results=results, warnings=warnings, **fields)


def prepare_evaluation(task: Task, trace: NetworkTrace, *, site_map: SiteMap) -> None:
    """Let the task's network evaluators scan the events of `trace` they have not seen yet.

    For a trace that is still growing (a live session): the evaluators memoize what
    they learn per event and per trace, so a later `evaluate_task` on the same trace
    only scans what arrived after this call, and gives the verdict it would have
    given without it. Results are thrown away; errors are left for `evaluate_task`.
    """
    if not len(trace):
        return
    effective_map = _site_map_for(task, trace, site_map)
    for config in task.eval:
        if isinstance(config, NetworkEventEvaluatorConfig):
            evaluate_network(config, trace, task=task, site_map=effective_map)
