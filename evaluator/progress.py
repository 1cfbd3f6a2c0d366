"""How far a running session is: what each network evaluator of its task would say if it finished now.

A live dashboard, an agent checking itself after every step, or a trainer
shaping rewards wants to know, while the agent works, which expected requests
have been seen and by which event. `task_progress` answers from the same
incremental, memoized evaluation state the finish uses (nothing is evaluated
twice: the candidate search and every event's normalization are kept on the
trace), so asking after every event stays cheap on long traces.

Each network evaluator reports `satisfied` — exactly the status it would have
in a finish now — and `event`, the index of the event that decides it: the
first matching candidate, or for `should_not_exist` the first candidate, which
violates it. For navigate tasks the last navigation and whether it matches are
given too. The agent's answer is not part of progress (it only exists at the
finish; `preview` judges a tentative one).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from webarena_live.evaluator.network_evaluator import deciding_event, evaluate_network
from webarena_live.evaluator.results import EvalStatus
from webarena_live.evaluator.sites import SiteMap
from webarena_live.evaluator.tasks import Task, TaskType
from webarena_live.evaluator.trace import NetworkTrace


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class EvaluatorProgress(_Frozen):
    """One network evaluator of the task, judged on the trace so far."""

    evaluator: int
    """Its position among the task's network evaluators (0-based, in task order)."""
    url: str | list[str]
    """The expected URL as the task writes it (a template, a `^…$` pattern, or alternatives)."""
    http_method: str
    should_not_exist: bool
    satisfied: bool
    """True when a finish now would score this evaluator a success."""
    event: int | None = None
    """Index of the deciding event: the one that satisfies it (or, with `should_not_exist`, violates it)."""
    error: str | None = None
    """Why it cannot be judged (a config the site map cannot render, an unreadable event)."""


class NavigationProgress(_Frozen):
    """A navigate task's last navigation, the event its evaluators look at."""

    event: int
    url: str
    matches: bool


class TaskProgress(_Frozen):
    task_id: int
    events: int
    """Events in the trace when progress was taken."""
    network: tuple[EvaluatorProgress, ...]
    last_navigation: NavigationProgress | None = None
    """Navigate tasks only; None before the first navigation."""


def task_progress(task: Task, trace: NetworkTrace, *, site_map: SiteMap) -> TaskProgress:
    """Every network evaluator of `task` judged on `trace` as it stands (never raises on bad input)."""
    network = []
    for position, config in enumerate(task.network_configs):
        result = evaluate_network(config, trace, task=task, site_map=site_map)
        index = error = None
        if result.status == EvalStatus.ERROR:
            error = result.error_msg
        else:
            try:
                event = deciding_event(config, trace, task=task, site_map=site_map)
            except Exception as problem:  # evaluate_network judged it, so this cannot fail; be safe anyway
                error = f"{type(problem).__name__}: {problem}"
            else:
                index = trace.index_of(event) if event is not None else None
        network.append(
            EvaluatorProgress(
                evaluator=position,
                url=config.expected.url,
                http_method=config.expected.http_method,
                should_not_exist=config.should_not_exist,
                satisfied=result.status == EvalStatus.SUCCESS,
                event=index,
                error=error,
            )
        )
    last = None
    if task.task_type == TaskType.NAVIGATE:
        navigation = trace.last_navigation()
        if navigation is not None:
            at = trace.index_of(navigation)
            last = NavigationProgress(
                event=at if at is not None else len(trace) - 1,
                url=navigation.url,
                matches=bool(network) and all(item.satisfied for item in network),
            )
    return TaskProgress(task_id=task.task_id, events=len(trace), network=tuple(network), last_navigation=last)
