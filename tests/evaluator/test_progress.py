"""Live progress (`evaluator/progress.py`) agrees with the finish, event by event, on official tasks.

For every official task with network evaluators, the golden trace is fed one
event at a time into a growing trace (as the live proxy does); after each
event, progress must equal the network evaluators' verdicts of a finish on
that prefix, computed from scratch on a fresh trace, and name an event that
really decides each satisfied evaluator.
"""

from __future__ import annotations

import timeit
from typing import Any

import pytest

from scripts.support.conformance import golden as g
from webarena_live.evaluator.evaluate import evaluate_task
from webarena_live.evaluator.har import event_from_har_entry
from webarena_live.evaluator.progress import task_progress
from webarena_live.evaluator.results import EvalStatus
from webarena_live.evaluator.sites import SiteMap
from webarena_live.evaluator.tasks import TaskSet, TaskType
from webarena_live.evaluator.trace import NetworkTrace

SITE_MAP = SiteMap.from_dict(g.site_config())


@pytest.fixture(scope="module")
def raw_tasks(official_raw: dict[int, dict[str, Any]]) -> dict[int, dict[str, Any]]:
    return official_raw


@pytest.fixture(scope="module")
def tasks(official_tasks: TaskSet) -> TaskSet:
    return official_tasks


def _network_statuses(task, response, trace) -> list[bool]:
    result = evaluate_task(task, response, trace, site_map=SITE_MAP)
    network = [r for r in result.evaluators_results if r.evaluator_name == "NetworkEventEvaluator"]
    return [r.status == EvalStatus.SUCCESS for r in network]


def test_progress_follows_the_finish_after_every_event(tasks: TaskSet, raw_tasks: dict[int, Any]) -> None:
    checked = 0
    for task_id, task in tasks.items():
        if not task.network_configs:
            continue
        raw = raw_tasks[task_id]
        events = [event_from_har_entry(e) for e in g.build_entries(raw, g.targets_for(raw))]
        growing = NetworkTrace()
        for count, event in enumerate(events, 1):
            growing.append(event)
            if count < len(events) and count % 3:  # every third prefix, and the whole trace
                continue
            progress = task_progress(task, growing, site_map=SITE_MAP)
            fresh = NetworkTrace(
                event_from_har_entry(e) for e in g.build_entries(raw, g.targets_for(raw))[:count]
            )
            assert [p.satisfied for p in progress.network] == _network_statuses(
                task, g.golden_response(raw), fresh
            ), (task_id, count)
            for item in progress.network:
                if item.satisfied and not item.should_not_exist:
                    assert item.event is not None and 0 <= item.event < count, (task_id, item)
            if task.task_type == TaskType.NAVIGATE and progress.last_navigation is not None:
                assert growing.event(progress.last_navigation.event).url == progress.last_navigation.url
            checked += 1
        final = task_progress(task, growing, site_map=SITE_MAP)
        assert final.events == len(events)
    assert checked > 1000


def test_should_not_exist_names_the_violating_event(tasks: TaskSet, raw_tasks: dict[int, Any]) -> None:
    task_id = next(i for i, t in tasks.items() if any(c.should_not_exist for c in t.network_configs))
    raw, task = raw_tasks[task_id], tasks[task_id]
    trace = NetworkTrace(event_from_har_entry(e) for e in g.build_entries(raw, g.targets_for(raw)))
    progress = task_progress(task, trace, site_map=SITE_MAP)
    guarded = [p for p in progress.network if p.should_not_exist]
    assert guarded and all(p.satisfied == (p.event is None) for p in guarded)


def test_progress_is_cheap_on_a_long_trace(tasks: TaskSet, raw_tasks: dict[int, Any]) -> None:
    """Asked after every event of a 10,000-event session, progress reads kept state: well under the finish."""
    task = next(t for t in tasks.values() if len(t.network_configs) >= 1 and t.task_type == TaskType.MUTATE)
    raw = raw_tasks[task.task_id]
    golden = g.build_entries(raw, g.targets_for(raw))
    noise = [e for e in golden if e["request"]["method"] == "GET"] or golden
    trace = NetworkTrace(event_from_har_entry(noise[i % len(noise)]) for i in range(10_000))
    for entry in golden:
        trace.append(event_from_har_entry(entry))
    task_progress(task, trace, site_map=SITE_MAP)  # the first call builds what later calls keep
    trace.append(event_from_har_entry(noise[0]))
    again = (
        min(timeit.repeat(lambda: task_progress(task, trace, site_map=SITE_MAP), number=20, repeat=3)) / 20
    )
    fresh = NetworkTrace(event_from_har_entry(noise[i % len(noise)]) for i in range(10_000))
    first = min(timeit.repeat(lambda: task_progress(task, fresh, site_map=SITE_MAP), number=1, repeat=1))
    print(f"\nprogress at 10,001 events: {again * 1000:.3f} ms kept state, {first * 1000:.1f} ms first call")
    assert again < first / 5  # a ratio in the same run; absolute times are the benchmark's job
