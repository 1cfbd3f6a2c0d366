"""A run report's figures of its sites' health: the verdicts whose session saw its sites fail
(`site_errors`, per site and replica) and success with and without the faults made on purpose
(`faults_injected`, per task and paired over the tasks tried both ways).

Both read each attempt's `attempt.json` (`Verdict.attempt`); a run written without them (an older
proxy, `webarena-live evaluate`) has no such figures and the report says none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from webarena_live.evaluator.run_verdicts import Verdict
from webarena_live.evaluator.site_answers import url_origin
from webarena_live.evaluator.stats import mcnemar_exact_p, paired_difference


def site_errors_of(verdict: Verdict) -> dict[str, Any] | None:
    """Its `attempt.json`'s `site_errors` when its sites answered failures, else None."""
    errors = (verdict.attempt or {}).get("site_errors")
    if isinstance(errors, dict) and isinstance(errors.get("count"), int) and errors["count"] > 0:
        return errors
    return None


def faults_of(verdict: Verdict) -> list[dict[str, Any]]:
    """The faults the proxy made on purpose in its session (its `attempt.json`'s `faults_injected`)."""
    faults = (verdict.attempt or {}).get("faults_injected")
    return [fault for fault in faults if isinstance(fault, dict)] if isinstance(faults, list) else []


def _replica_names(verdict: Verdict) -> dict[str, str]:
    """Each origin of the replicas its lease held, as `__SITE__ origin` (the report's name for it)."""
    replicas = (verdict.attempt or {}).get("replicas")
    if not isinstance(replicas, dict):
        return {}
    return {
        url_origin(url): f"{site} {url_origin(url)}" for site, url in replicas.items() if isinstance(url, str)
    }


def site_errors_figures(verdicts: Sequence[Verdict]) -> dict[str, Any]:
    """The verdicts that ran on failing sites: how many, their tasks and folders, and how many per site
    and replica (`by_replica`: `__SITE__ origin`, or the origin alone without a lease) with the failing
    answers they saw there."""
    by_replica: dict[str, dict[str, int]] = {}
    touched = []
    for verdict in verdicts:
        errors = site_errors_of(verdict)
        if errors is None:
            continue
        touched.append(verdict)
        names = _replica_names(verdict)
        for origin, count in (errors.get("origins") or {}).items():
            entry = by_replica.setdefault(names.get(origin, origin), {"verdicts": 0, "failing_answers": 0})
            entry["verdicts"] += 1
            entry["failing_answers"] += int(count)
    return {
        "verdicts": len(touched),
        "task_ids": sorted({v.task_id for v in touched}),
        "folders": [v.folder for v in touched],
        "by_replica": dict(sorted(by_replica.items())),
    }


def _success(tried: Sequence[Verdict]) -> dict[str, Any]:
    won = sum(v.status == "success" for v in tried)
    return {"attempts": len(tried), "success": won, "rate": won / len(tried) if tried else None}


def faults_figures(attempts: Mapping[int, Sequence[Verdict]]) -> dict[str, Any] | None:
    """Success with and without injected faults, per task and over all attempts; over the tasks tried
    both ways, the paired difference (each task's last faulted attempt against its last clean one) with
    its interval and McNemar's exact p, as the report pairs two runs. None when no attempt drew a fault."""
    if not any(faults_of(v) for tried in attempts.values() for v in tried):
        return None
    by_task: dict[str, Any] = {}
    every_with: list[Verdict] = []
    every_without: list[Verdict] = []
    table = {"both": 0, "only_with": 0, "only_without": 0, "neither": 0}
    for task_id, tried in sorted(attempts.items()):
        with_faults = [v for v in tried if faults_of(v)]
        without = [v for v in tried if not faults_of(v)]
        every_with += with_faults
        every_without += without
        by_task[str(task_id)] = {
            "with_faults": _success(with_faults),
            "without_faults": _success(without),
            "faults": sum(len(faults_of(v)) for v in with_faults),
        }
        if with_faults and without:
            faulted, clean = with_faults[-1].status == "success", without[-1].status == "success"
            key = (
                "both"
                if faulted and clean
                else "only_with"
                if faulted
                else "only_without"
                if clean
                else "neither"
            )
            table[key] += 1
    difference, interval = paired_difference(
        table["both"], table["only_with"], table["only_without"], table["neither"]
    )
    return {
        "with_faults": _success(every_with),
        "without_faults": _success(every_without),
        "paired": {
            "tasks": sum(table.values()),
            **table,
            "difference": difference,
            "interval": list(interval),
            "mcnemar_p": mcnemar_exact_p(table["only_with"], table["only_without"]),
        },
        "by_task": by_task,
    }
