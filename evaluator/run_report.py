"""A whole run in figures: success rates with their intervals, by site, action and template.

Reads a run directory in the reference's layout (`OUT/<task_id>/eval_result.json`, written by the
proxy, by `webarena-live evaluate` or by the reference's `eval-tasks`) and the dataset the tasks
come from. **Every attempt counts**: a task attempted again (eight episodes of one task in a rollout)
keeps its earlier attempts in `OUT/.attempts/<task_id>/<n>/` (`evaluator/run_dir.py`), and each
figure is given per attempt — the success rate of all judged attempts with its Wilson interval, the
mean reward a rollout prints — and per task: tasks with *any* successful attempt, with *all* attempts
successful, whose *last* attempt succeeded (the reference's own view of the folder), each with its
interval over tasks, and the *mean* of each task's success rate. With one attempt per task they are
all the same number.

A task of the dataset without a verdict in the directory is *missing*, never a failure. Errors (the
evaluation could not run) stay apart from failures, and a non-success the environment caused — the
agent answered `UNKNOWN_ERROR`, or a site never answered (an event with status 0) — is counted as an
*environment* problem too, so a broken deployment does not read as a bad agent. Each failing check is
listed with its reasons (the assertions' messages). Two runs compare pairwise in
`evaluator/run_compare.py`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from webarena_live.evaluator.run_dir import ATTEMPTS_DIR, POOL_FILE, named_runs, task_attempts
from webarena_live.evaluator.run_sites import faults_figures, site_errors_figures
from webarena_live.evaluator.run_verdicts import (
    ReportError,
    Verdict,
    VerdictReader,
    read_verdict,
)
from webarena_live.evaluator.stats import wilson_interval
from webarena_live.evaluator.tasks import TaskSet

__all__ = ["Rate", "ReportError", "RunReport", "TaskRate", "report_run"]


@dataclass(frozen=True)
class TaskRate:
    """A per-task figure of a group: how many of its tasks meet it, with the Wilson interval."""

    tasks: int
    success: int
    rate: float
    interval: tuple[float, float]

    @classmethod
    def of(cls, met: int, tasks: int) -> TaskRate:
        return cls(tasks, met, met / tasks if tasks else 0.0, wilson_interval(met, tasks))

    def to_dict(self) -> dict[str, Any]:
        return {"tasks": self.tasks, "success": self.success, "rate": self.rate,
                "interval": list(self.interval)}  # fmt: skip


@dataclass(frozen=True)
class Rate:
    """Figures of a group of tasks: per judged attempt (`success` of `attempts`, `rate`, `interval`,
    the counts of failures, errors and environment problems) and per task (`any`, `all`, `last`,
    `mean`)."""

    tasks: int
    attempts: int
    success: int
    failure: int
    errors: int
    environment: int
    rate: float
    interval: tuple[float, float]
    any: TaskRate
    all: TaskRate
    last: TaskRate
    mean: float
    """The mean over tasks of each task's success rate (its successful attempts over its attempts)."""
    exposed: int = 0
    """Attempts whose verdict another session's change could have decided (`Verdict.exposed`)."""
    unexposed: TaskRate | None = None
    """Success per attempt over the attempts nobody else's change reached (`tasks` counts attempts)."""

    @classmethod
    def of(cls, attempts: Mapping[int, Sequence[Verdict]]) -> Rate:
        every = [verdict for tried in attempts.values() for verdict in tried]
        success = sum(v.status == "success" for v in every)
        errors = sum(v.status == "error" for v in every)
        won = [[v.status == "success" for v in tried] for tried in attempts.values() if tried]
        tasks = len(won)
        return cls(
            tasks=tasks,
            attempts=len(every),
            success=success,
            failure=len(every) - success - errors,
            errors=errors,
            environment=sum(v.environment for v in every),
            rate=success / len(every) if every else 0.0,
            interval=wilson_interval(success, len(every)),
            any=TaskRate.of(sum(any(w) for w in won), tasks),
            all=TaskRate.of(sum(all(w) for w in won), tasks),
            last=TaskRate.of(sum(w[-1] for w in won), tasks),
            mean=sum(sum(w) / len(w) for w in won) / tasks if tasks else 0.0,
            exposed=sum(v.exposed for v in every),
            unexposed=TaskRate.of(
                sum(v.status == "success" for v in every if not v.exposed), sum(not v.exposed for v in every)
            ),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "tasks": self.tasks, "attempts": self.attempts, "success": self.success, "failure": self.failure,
            "errors": self.errors, "environment": self.environment, "rate": self.rate,
            "interval": list(self.interval),
            "per_task": {"any": self.any.to_dict(), "all": self.all.to_dict(), "last": self.last.to_dict(),
                         "mean": self.mean},
            "exposed": self.exposed,
            "unexposed": self.unexposed.to_dict() if self.unexposed is not None else None,
        }  # fmt: skip


def _attempt_row(verdict: Verdict) -> dict[str, Any]:
    record = verdict.attempt or {}
    return {
        "folder": verdict.folder, "status": verdict.status,
        **{key: record[key] for key in ("attempt", "session", "started", "finished") if key in record},
        "failing": [{"check": f.check, "reason": f.reason} for f in verdict.failing],
    }  # fmt: skip


@dataclass(frozen=True)
class RunReport:
    """The figures of one run directory over its dataset."""

    directory: Path
    attempts: dict[int, tuple[Verdict, ...]]
    """Each judged task's judged attempts, oldest first; the last is the task folder's."""
    missing: tuple[int, ...]
    unjudged: tuple[str, ...] = ()
    """Attempt folders (relative to the directory) with no `eval_result.json` (evaluate them first)."""
    hard: frozenset[int] | None = None
    """The official hard subset's task ids, when the dataset is the official one."""
    templates: Mapping[int, str] = field(default_factory=dict)
    """Each intent template's text by id, from the dataset (none without one)."""
    pool: Mapping[str, Any] | None = None
    """The replica pool's counters per site (resets done, skipped, failed, seconds), when the proxy that
    wrote the directory leased replicas."""
    overall: Rate = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "overall", Rate.of(self.attempts))

    @property
    def verdicts(self) -> dict[int, Verdict]:
        """Each judged task's last attempt: the verdict the reference's tooling reads in its folder."""
        return {task_id: tried[-1] for task_id, tried in self.attempts.items() if tried}

    def by(self, key: str) -> dict[str, Rate]:
        """Figures by `site` (a task of several sites counts under each), `action` or `template`."""
        groups: dict[str, dict[int, tuple[Verdict, ...]]] = {}
        for task_id, tried in self.attempts.items():
            last = tried[-1]
            names = {"site": last.sites, "action": (last.action,), "template": (str(last.template),)}[key]
            for name in names:
                groups.setdefault(name, {})[task_id] = tried
        ordered = sorted(groups, key=lambda name: int(name) if key == "template" else name)
        return {name: Rate.of(groups[name]) for name in ordered}

    def failing_checks(self) -> list[dict[str, Any]]:
        """Each failing check, the most frequent first: the attempts and tasks it failed, and its reasons
        (each with the attempt folders it was given for, the most frequent first)."""
        # each attempt once per check and reason, however many of its evaluators failed that way
        checks: dict[str, dict[str, dict[str, Verdict]]] = {}
        for tried in self.attempts.values():
            for verdict in tried:
                for failure in verdict.failing:
                    by_reason = checks.setdefault(failure.check, {})
                    by_reason.setdefault(failure.reason, {})[verdict.folder] = verdict
        listed = []
        for check, reasons in checks.items():
            seen = {folder: verdict for given in reasons.values() for folder, verdict in given.items()}
            listed.append({
                "check": check, "count": len(seen),
                "task_ids": sorted({v.task_id for v in seen.values()}),
                "reasons": [{"reason": reason, "count": len(given), "folders": list(given)}
                            for reason, given in sorted(reasons.items(), key=lambda item: -len(item[1]))],
            })  # fmt: skip
        return sorted(listed, key=lambda item: (-item["count"], item["check"]))

    def to_dict(self) -> dict[str, Any]:
        every = [verdict for tried in self.attempts.values() for verdict in tried]
        by_template = {name: rate.to_dict() for name, rate in self.by("template").items()}
        templates = {name: self.templates[int(name)] for name in by_template if int(name) in self.templates}
        by_task = {str(task_id): [_attempt_row(v) for v in tried] for task_id, tried in self.attempts.items()}
        document: dict[str, Any] = {
            "directory": str(self.directory),
            **self.overall.to_dict(),
            "missing": len(self.missing),
            "missing_task_ids": list(self.missing),
            "unjudged_task_ids": sorted({int(_task_of(folder)) for folder in self.unjudged}),
            "unjudged_folders": list(self.unjudged),
            "environment_task_ids": sorted({v.task_id for v in every if v.environment}),
            "error_task_ids": sorted({v.task_id for v in every if v.status == "error"}),
            "exposed_task_ids": sorted({v.task_id for v in every if v.exposed}),
            "lease_ended": [
                {"task_id": v.task_id, "folder": v.folder, "lease_ended": v.lease_ended}
                for v in every
                if v.lease_ended
            ],
            "by_site": {name: rate.to_dict() for name, rate in self.by("site").items()},
            "by_action": {name: rate.to_dict() for name, rate in self.by("action").items()},
            "by_template": by_template,
            "templates": templates,
            "failing_checks": self.failing_checks(),
            "site_errors": site_errors_figures(every),
            "attempts_by_task": by_task,
        }  # fmt: skip
        if (faults := faults_figures(self.attempts)) is not None:
            document["faults"] = faults
        if self.hard is not None:
            hard = {task_id: tried for task_id, tried in self.attempts.items() if task_id in self.hard}
            document["hard"] = Rate.of(hard).to_dict()
        if self.pool is not None:
            document["pool"] = dict(self.pool)
        return document


def _task_of(folder: str) -> str:
    """The task id of an attempt folder named relative to its run directory."""
    parts = folder.split("/")
    return parts[1] if parts[0] == ATTEMPTS_DIR else parts[0]


def _task_ids(directory: Path) -> list[int]:
    """Tasks with an attempt in `directory`: task folders, and earlier attempts kept aside."""
    found = {int(entry.name) for entry in directory.iterdir() if entry.name.isdigit() and entry.is_dir()}
    kept = directory / ATTEMPTS_DIR
    if kept.is_dir():
        found |= {int(entry.name) for entry in kept.iterdir() if entry.name.isdigit() and entry.is_dir()}
    return sorted(found)


def report_run(
    directory: Path,
    tasks: TaskSet | None = None,
    *,
    hard: frozenset[int] | None = None,
    read: VerdictReader | None = None,
) -> RunReport:
    """The report of `directory` (`OUT/<task_id>/…`, earlier attempts in `OUT/.attempts/`) over `tasks`
    (the dataset; None: the verdicts only).

    `read` reads one attempt folder's verdict (`read_verdict`; a caching one for a report asked again
    and again, as the dashboard does)."""
    read = read or read_verdict
    if not directory.is_dir():
        raise ReportError(f"{directory}: no such directory")
    task_ids = _task_ids(directory)
    if not task_ids:
        named = [run.name for run in named_runs(directory)]
        if named:
            listed = ", ".join(named)
            message = f"{directory} holds named runs ({listed}): report one, e.g. {directory / named[0]}"
            raise ReportError(message, named_runs=tuple(named))
        raise ReportError(f"{directory}: no task folders (OUT/<task_id>/eval_result.json) to report")
    attempts: dict[int, tuple[Verdict, ...]] = {}
    unjudged: list[str] = []
    for task_id in task_ids:
        judged = []
        for folder in task_attempts(directory, task_id):
            verdict = read(folder, tasks)
            if verdict is None:
                unjudged.append(str(folder.relative_to(directory)))
            else:
                judged.append(verdict)
        if judged:
            attempts[judged[-1].task_id] = tuple(judged)
    judged_ids = set(attempts)
    if tasks is not None:
        missing = tuple(sorted(set(tasks) - judged_ids))
    else:
        missing = tuple(sorted({int(_task_of(folder)) for folder in unjudged} - judged_ids))
    return RunReport(directory, attempts, missing, tuple(unjudged), hard, _templates(tasks), _pool(directory))


def _pool(directory: Path) -> dict[str, Any] | None:
    """The replica pool's counters the proxy kept in its output directory (`POOL_FILE`): this one, or
    the one holding this named run (`scope` then says they count every run of it)."""
    for where, scope in (
        (directory, "this directory"),
        (directory.parent, "every run of its output directory"),
    ):
        try:
            document = json.loads((where / POOL_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(document, dict):
            return {**document, "scope": scope}
    return None


def _templates(tasks: TaskSet | None) -> dict[int, str]:
    if tasks is None:
        return {}
    return {task.intent_template_id: task.intent_template for task in _each(tasks)}


def _each(tasks: TaskSet) -> Iterable[Any]:
    return (tasks[task_id] for task_id in tasks)
