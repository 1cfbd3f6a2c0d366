"""A whole run in figures: success rates with their intervals, by site, action and template.

Reads a run directory in the reference's layout (`OUT/<task_id>/eval_result.json`, written by the
proxy, by `webarena-live evaluate` or by the reference's `eval-tasks`) and the dataset the tasks
come from. Every figure counts judged tasks: a task of the dataset without a verdict in the
directory is *missing*, never a failure. Errors (the evaluation could not run) stay apart from
failures, and a non-success the environment caused — the agent answered `UNKNOWN_ERROR`, or a site
never answered (an event with status 0) — is counted as an *environment* problem too, so a broken
deployment does not read as a bad agent. Two runs of the same tasks compare pairwise
(`compare_runs`): which tasks flipped, the paired difference with its interval, the exact McNemar
test.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from webarena_live.evaluator.errors import WebArenaLiveError
from webarena_live.evaluator.run_dir import RESPONSE_FILE, RESULT_FILE, TRACE_FILE, named_runs
from webarena_live.evaluator.stats import mcnemar_exact_p, paired_difference, wilson_interval
from webarena_live.evaluator.tasks import TaskSet

_UNANSWERED = re.compile(rb'"status"\s*:\s*0\s*[,}]')
"""A HAR response with status 0: the request never got an answer from the site."""


@dataclass(frozen=True)
class Verdict:
    """One judged task of a run, as the report reads it."""

    task_id: int
    status: str
    sites: tuple[str, ...]
    template: int
    action: str
    environment: bool
    """A non-success the environment caused (see the module's docstring)."""
    failing: tuple[str, ...] = ()
    """The checks that failed: `Evaluator` or `Evaluator: assertion`."""


@dataclass(frozen=True)
class Rate:
    """Figures of a group of judged tasks."""

    tasks: int
    success: int
    failure: int
    errors: int
    environment: int
    rate: float
    interval: tuple[float, float]

    @classmethod
    def of(cls, verdicts: Iterable[Verdict]) -> Rate:
        verdicts = list(verdicts)
        success = sum(v.status == "success" for v in verdicts)
        errors = sum(v.status == "error" for v in verdicts)
        tasks = len(verdicts)
        return cls(
            tasks=tasks,
            success=success,
            failure=tasks - success - errors,
            errors=errors,
            environment=sum(v.environment for v in verdicts),
            rate=success / tasks if tasks else 0.0,
            interval=wilson_interval(success, tasks),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "tasks": self.tasks, "success": self.success, "failure": self.failure, "errors": self.errors,
            "environment": self.environment, "rate": self.rate, "interval": list(self.interval),
        }  # fmt: skip


@dataclass(frozen=True)
class RunReport:
    """The figures of one run directory over its dataset."""

    directory: Path
    verdicts: dict[int, Verdict]
    missing: tuple[int, ...]
    unjudged: tuple[int, ...] = ()
    """Task folders with no `eval_result.json` (evaluate them first)."""
    hard: frozenset[int] | None = None
    """The official hard subset's task ids, when the dataset is the official one."""
    overall: Rate = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "overall", Rate.of(self.verdicts.values()))

    def by(self, key: str) -> dict[str, Rate]:
        """Figures by `site` (a task of several sites counts under each), `action` or `template`."""
        groups: dict[str, list[Verdict]] = {}
        for verdict in self.verdicts.values():
            names = {
                "site": verdict.sites,
                "action": (verdict.action,),
                "template": (str(verdict.template),),
            }[key]
            for name in names:
                groups.setdefault(name, []).append(verdict)
        ordered = sorted(groups, key=lambda name: int(name) if key == "template" else name)
        return {name: Rate.of(groups[name]) for name in ordered}

    def failing_checks(self) -> list[tuple[str, list[int]]]:
        """Each failing check with the tasks it failed on, the most frequent first."""
        checks: dict[str, list[int]] = {}
        for verdict in self.verdicts.values():
            for check in verdict.failing:
                checks.setdefault(check, []).append(verdict.task_id)
        return sorted(checks.items(), key=lambda item: (-len(item[1]), item[0]))

    def to_dict(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "directory": str(self.directory),
            **self.overall.to_dict(),
            "missing": len(self.missing),
            "missing_task_ids": list(self.missing),
            "unjudged_task_ids": list(self.unjudged),
            "environment_task_ids": sorted(v.task_id for v in self.verdicts.values() if v.environment),
            "error_task_ids": sorted(v.task_id for v in self.verdicts.values() if v.status == "error"),
            "by_site": {name: rate.to_dict() for name, rate in self.by("site").items()},
            "by_action": {name: rate.to_dict() for name, rate in self.by("action").items()},
            "by_template": {name: rate.to_dict() for name, rate in self.by("template").items()},
            "failing_checks": [
                {"check": name, "count": len(ids), "task_ids": ids} for name, ids in self.failing_checks()
            ],
        }
        if self.hard is not None:
            document["hard"] = Rate.of(v for v in self.verdicts.values() if v.task_id in self.hard).to_dict()
        return document


class ReportError(WebArenaLiveError):
    """The directory cannot be reported (not a run directory, or one holding named runs only)."""

    def __init__(self, message: str, *, named_runs: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.named_runs = named_runs
        """The named runs the directory holds, when that is why it cannot be reported itself."""


def _failing(result: Mapping[str, Any]) -> tuple[str, ...]:
    checks = []
    for evaluator in result.get("evaluators_results") or ():
        if evaluator.get("status") == "success":
            continue
        name = str(evaluator.get("evaluator_name", "evaluator"))
        failed = [a for a in evaluator.get("assertions") or () if a.get("status") != "success"]
        checks += [f"{name}: {a.get('assertion_name', 'assertion')}" for a in failed] or [name]
    return tuple(checks)


def _environment(task_dir: Path, status: str) -> bool:
    if status == "success":
        return False
    try:
        answer = json.loads((task_dir / RESPONSE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        answer = None
    if isinstance(answer, dict) and str(answer.get("status", "")).upper() == "UNKNOWN_ERROR":
        return True
    try:
        return _UNANSWERED.search((task_dir / TRACE_FILE).read_bytes()) is not None
    except OSError:
        return False


def read_verdict(task_dir: Path, tasks: TaskSet | None) -> Verdict | None:
    """The verdict in `task_dir/eval_result.json`, or None when there is none."""
    try:
        result = json.loads((task_dir / RESULT_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:
        raise ReportError(f"{task_dir / RESULT_FILE}: unreadable verdict ({error})") from None
    task_id = int(result.get("task_id", task_dir.name))
    task = tasks[task_id] if tasks is not None and task_id in tasks else None
    status = str(result.get("status", "error")).lower()
    return Verdict(
        task_id=task_id,
        status=status,
        sites=tuple(str(site) for site in (task.sites if task else result.get("sites") or ("unknown",))),
        template=task.intent_template_id if task else int(result.get("intent_template_id", -1)),
        action=task.task_type.value.lower() if task else "unknown",
        environment=_environment(task_dir, status),
        failing=_failing(result),
    )


class VerdictCache:
    """`read_verdict` that reads a task folder again only when its `eval_result.json` changed: for a
    report asked after every finish (the dashboard's run view)."""

    def __init__(self) -> None:
        self._known: dict[Path, tuple[tuple[int, int], Verdict | None]] = {}

    def read(self, task_dir: Path, tasks: TaskSet | None) -> Verdict | None:
        try:
            stat = (task_dir / RESULT_FILE).stat()
        except FileNotFoundError:
            return None
        stamp = (stat.st_mtime_ns, stat.st_size)
        known = self._known.get(task_dir)
        if known is not None and known[0] == stamp:
            return known[1]
        verdict = read_verdict(task_dir, tasks)
        self._known[task_dir] = (stamp, verdict)
        return verdict


VerdictReader = Callable[[Path, "TaskSet | None"], "Verdict | None"]


def report_run(
    directory: Path,
    tasks: TaskSet | None = None,
    *,
    hard: frozenset[int] | None = None,
    read: VerdictReader | None = None,
) -> RunReport:
    """The report of `directory` (`OUT/<task_id>/…`) over `tasks` (the dataset; None: the verdicts only).

    `read` reads one task folder's verdict (`read_verdict`; a caching one for a report asked again
    and again, as the dashboard does)."""
    read = read or read_verdict
    if not directory.is_dir():
        raise ReportError(f"{directory}: no such directory")
    task_dirs = [entry for entry in directory.iterdir() if entry.name.isdigit() and entry.is_dir()]
    if not task_dirs:
        named = [run.name for run in named_runs(directory)]
        if named:
            listed = ", ".join(named)
            message = f"{directory} holds named runs ({listed}): report one, e.g. {directory / named[0]}"
            raise ReportError(message, named_runs=tuple(named))
        raise ReportError(f"{directory}: no task folders (OUT/<task_id>/eval_result.json) to report")
    verdicts: dict[int, Verdict] = {}
    unjudged = []
    for task_dir in task_dirs:
        verdict = read(task_dir, tasks)
        if verdict is None:
            unjudged.append(int(task_dir.name))
        else:
            verdicts[verdict.task_id] = verdict
    missing = tuple(sorted(set(tasks) - set(verdicts))) if tasks is not None else tuple(sorted(unjudged))
    return RunReport(directory, verdicts, missing, tuple(sorted(unjudged)), hard)


@dataclass(frozen=True)
class Comparison:
    """Two runs on the tasks both judged: flips, the paired difference (here minus there), McNemar."""

    only_here: tuple[int, ...]
    only_there: tuple[int, ...]
    both: int
    neither: int
    difference: float
    interval: tuple[float, float]
    p_value: float

    @classmethod
    def of(
        cls, here: Mapping[int, Verdict], there: Mapping[int, Verdict], task_ids: Iterable[int]
    ) -> Comparison:
        ids = sorted(task_ids)
        won = {i: here[i].status == "success" for i in ids}
        other = {i: there[i].status == "success" for i in ids}
        only_here = tuple(i for i in ids if won[i] and not other[i])
        only_there = tuple(i for i in ids if other[i] and not won[i])
        both = sum(won[i] and other[i] for i in ids)
        neither = len(ids) - both - len(only_here) - len(only_there)
        difference, interval = paired_difference(both, len(only_here), len(only_there), neither)
        return cls(only_here, only_there, both, neither, difference, interval,
                   mcnemar_exact_p(len(only_here), len(only_there)))  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        return {
            "tasks": self.both + self.neither + len(self.only_here) + len(self.only_there),
            "only_here": list(self.only_here), "only_there": list(self.only_there),
            "difference": self.difference, "interval": list(self.interval), "p_value": self.p_value,
        }  # fmt: skip


def compare_runs(here: RunReport, there: RunReport) -> dict[str, Any]:
    """The paired comparison of two reports on the tasks both judged, overall and by site."""
    shared = set(here.verdicts) & set(there.verdicts)
    document = Comparison.of(here.verdicts, there.verdicts, shared).to_dict()
    document["by_site"] = {}
    sites = sorted({site for task_id in shared for site in here.verdicts[task_id].sites})
    for site in sites:
        ids = [task_id for task_id in shared if site in here.verdicts[task_id].sites]
        document["by_site"][site] = Comparison.of(here.verdicts, there.verdicts, ids).to_dict()
    return document
