"""NetworkEventEvaluator: did the agent's traffic contain the expected request?

Same verdicts as the reference evaluator, in four steps:

1. *Pick candidate events.* Navigate tasks checked with a GET look only at
   the last navigation event. Otherwise every evaluation event (static assets
   left out) whose method, base URL (`Url.compare_path`) and — when a referer
   is expected — referer base URL match is a candidate; `last_event_only`
   keeps just the last candidate.
2. *Expected event*, normalized strictly (an unusable expectation is an error).
3. *Each candidate*, normalized leniently: URL with query parameters, the
   expected headers, post data (ignored fields dropped, JSONPath keys
   extracted, `post_data_schema` applied), response content (JSONPath keys)
   and response cookies (URL-decoded).
4. *Compare*: success when some candidate matches every expected field
   (`should_not_exist` inverts: success when there is no candidate at all).

Speed: everything about the expected side is prepared once per
(config, task sites, site map) — a `Plan` (`evaluator/network_plan.py`) — and everything about an event is
memoized on the event under the plan's token, and the search for candidates
resumes where it stopped, so evaluating the same trace again (the live proxy
does, and a trace only grows) looks at new events only. An event is only
URL-parsed when its method already fits.
"""

from __future__ import annotations

from typing import Any

from webarena_live.evaluator import trace_defects, values
from webarena_live.evaluator.compare import compare
from webarena_live.evaluator.network_plan import Plan
from webarena_live.evaluator.results import Assertion, EvaluatorResult
from webarena_live.evaluator.sites import SiteMap
from webarena_live.evaluator.tasks import NetworkEventEvaluatorConfig, Task
from webarena_live.evaluator.trace import NetworkEvent, NetworkTrace

EVALUATOR_NAME = "NetworkEventEvaluator"

_PLANS: dict[tuple[Any, ...], tuple[NetworkEventEvaluatorConfig, Plan | Exception]] = {}
_MAX_PLANS = 2048


def _plan_for(config: NetworkEventEvaluatorConfig, task: Task, site_map: SiteMap) -> Plan:
    key = (id(config), task.sites, task.task_type, site_map.key)
    cached = _PLANS.get(key)
    if cached is None or cached[0] is not config:
        if len(_PLANS) >= _MAX_PLANS:
            _PLANS.clear()
        try:
            plan: Plan | Exception = Plan(config, task, site_map)
        except Exception as error:
            plan = error
        cached = _PLANS[key] = (config, plan)
    if isinstance(cached[1], Exception):
        raise cached[1]
    return cached[1]


def candidates(plan: Plan, trace: NetworkTrace) -> list[NetworkEvent]:
    """Step 1: the events that could be the expected one, in trace order.

    The search resumes where the previous evaluation of this trace stopped
    (traces only grow), keeping what it found so far.
    """
    if trace_defects.has_defects(trace):
        return trace_defects.candidates(plan, trace)  # a flawed file: read as the reference reads it
    if plan.navigate_only:
        last = trace.last_navigation()
        return [last] if last is not None else []
    scanned, found = trace.memo.get(plan.candidate_key, (0, []))
    if scanned < len(trace):
        # An event's verdict is final once made (events never change), so only new events are
        # looked at, and one whose method cannot fit is never even made an event object.
        found = [*found, *trace.find(scanned, plan.method, plan.fits)]
        trace.memo[plan.candidate_key] = (len(trace), found)
    return found


def _mismatches(plan: Plan, normalized: dict[str, Any]) -> list[Assertion]:
    return compare(
        normalized, plan.expected, ordered=False, value_name="network_event", ignore_extra_keys=True
    )


def deciding_event(
    config: NetworkEventEvaluatorConfig, trace: NetworkTrace, *, task: Task, site_map: SiteMap
) -> NetworkEvent | None:
    """The event that decides the evaluator right now: the first candidate matching every expected field
    (for `should_not_exist`, the first candidate at all: the one that violates it); None when there is none.

    Reads the same memoized search and normalization `evaluate_network` does; raises on a config it
    cannot prepare (which `evaluate_network` reports as an error).
    """
    plan = _plan_for(config, task, site_map)
    events = candidates(plan, trace)
    if config.last_event_only:
        events = events[-1:]
    if config.should_not_exist:
        return events[0] if events else None
    return next((event for event in events if not _mismatches(plan, plan.normalized_event(event))), None)


def _assertions(plan: Plan, actual: list[dict[str, Any]]) -> list[Assertion]:
    if plan.config.should_not_exist:
        if not actual:
            return []
        return [
            Assertion.failure(
                "unexpected_navigation_event",
                f"{len(actual)} event(s) match, but this evaluator requires that none does",
            )
        ]
    if not actual:
        return [
            Assertion.failure(
                "missing_navigation_event",
                "the trace holds no event with the expected method and URL path",
            )
        ]
    differences: list[str] = []
    for event in actual:
        mismatches = _mismatches(plan, event)
        if not mismatches:
            return []
        differences = [msg for item in mismatches for msg in (item.assertion_msgs or ())]
    return [
        Assertion.failure(
            "missing_navigation_event",
            f"{len(actual)} candidate event(s) checked, none matches every expected field",
            *differences[:5],
        )
    ]


def evaluate_network(
    config: NetworkEventEvaluatorConfig, trace: NetworkTrace, *, task: Task, site_map: SiteMap
) -> EvaluatorResult:
    """Judge `trace` against one NetworkEventEvaluator of `task` (never raises on bad input)."""
    normalized: list[dict[str, Any]] | None = None
    plan: Plan | None = None
    events: list[NetworkEvent] = []
    try:
        plan = _plan_for(config, task, site_map)
        events = candidates(plan, trace)
        if config.last_event_only:
            events = events[-1:]
        normalized = [plan.normalized_event(event) for event in events]
        assertions = _assertions(plan, normalized)
        reports = [plan.reports(event) for event in events]
    except Exception as error:
        return EvaluatorResult.from_error(
            EVALUATOR_NAME,
            f"{EVALUATOR_NAME} could not evaluate task {task.task_id}: {error}",
            actual_normalized=values.report(normalized) if normalized is not None else None,
            expected=plan.expected_report if plan is not None else None,
            should_not_exist=config.should_not_exist,
        )
    return EvaluatorResult.from_assertions(
        EVALUATOR_NAME,
        assertions,
        actual=[raw for raw, _ in reports],
        actual_normalized=[view for _, view in reports],
        expected=plan.expected_report,
        should_not_exist=config.should_not_exist,
    )


def clear_plans() -> None:
    """Forget prepared configs (tests and long-running processes that reload task files)."""
    _PLANS.clear()


__all__ = ["EVALUATOR_NAME", "candidates", "clear_plans", "deciding_event", "evaluate_network"]
