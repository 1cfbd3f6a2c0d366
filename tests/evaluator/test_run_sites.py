"""A run report's figures of its sites' health (evaluator/run_sites.py): the verdicts that ran on failing
sites, per site and replica, and success with and without faults made on purpose, paired per task."""

from __future__ import annotations

from typing import Any

from webarena_live.evaluator import Verdict, mcnemar_exact_p, paired_difference
from webarena_live.evaluator.run_sites import faults_figures, site_errors_figures

A, B = "http://127.0.0.1:7001", "http://127.0.0.1:7002"
FAULT = {"fault": "status", "status": 503, "url": f"{A}/p", "method": "GET", "failing": True}


def verdict(task_id: int, status: str, folder: str, **attempt: Any) -> Verdict:
    return Verdict(
        task_id=task_id, status=status, sites=("shopping",), template=1, action="retrieve",
        environment=False, folder=folder, attempt=attempt or None,
    )  # fmt: skip


def errors(**origins: int) -> dict[str, Any]:
    by = {A if name == "a" else B: count for name, count in origins.items()}
    return {"count": sum(by.values()), "origins": by, "first": []}


def test_verdicts_on_failing_sites_are_counted_per_site_and_replica() -> None:
    verdicts = [
        verdict(1, "failure", "1", replicas={"__SHOPPING__": A}, site_errors=errors(a=3)),
        verdict(2, "success", "2", replicas={"__SHOPPING__": B}, site_errors=errors()),  # none failed
        verdict(3, "failure", "3", replicas={"__SHOPPING__": A + "/"}, site_errors=errors(a=1)),
        verdict(4, "failure", "4", site_errors=errors(b=2)),  # no lease: named by its origin
        verdict(5, "failure", "5"),  # written without site_errors (an older proxy)
    ]
    assert site_errors_figures(verdicts) == {
        "verdicts": 3,
        "task_ids": [1, 3, 4],
        "folders": ["1", "3", "4"],
        "by_replica": {
            B: {"verdicts": 1, "failing_answers": 2},
            f"__SHOPPING__ {A}": {"verdicts": 2, "failing_answers": 4},
        },
    }
    assert site_errors_figures([])["verdicts"] == 0


def test_success_with_and_without_faults_per_task_and_paired() -> None:
    attempts = {
        1: (verdict(1, "success", "a1"), verdict(1, "failure", "b1", faults_injected=[FAULT])),
        2: (verdict(2, "success", "a2", faults_injected=[FAULT, FAULT]), verdict(2, "success", "b2")),
        3: (verdict(3, "failure", "a3"),),  # tried without faults only: not paired
        4: (verdict(4, "failure", "a4", faults_injected=[FAULT]), verdict(4, "failure", "b4")),
    }
    figures = faults_figures(attempts)
    assert figures is not None
    assert figures["with_faults"] == {"attempts": 3, "success": 1, "rate": 1 / 3}
    assert figures["without_faults"] == {"attempts": 4, "success": 2, "rate": 0.5}
    assert figures["by_task"]["2"] == {
        "with_faults": {"attempts": 1, "success": 1, "rate": 1.0},
        "without_faults": {"attempts": 1, "success": 1, "rate": 1.0},
        "faults": 2,
    }
    assert figures["by_task"]["3"]["with_faults"] == {"attempts": 0, "success": 0, "rate": None}
    difference, interval = paired_difference(1, 0, 1, 1)
    assert figures["paired"] == {
        "tasks": 3, "both": 1, "only_with": 0, "only_without": 1, "neither": 1,
        "difference": difference, "interval": list(interval), "mcnemar_p": mcnemar_exact_p(0, 1),
    }  # fmt: skip
    assert difference < 0
    assert faults_figures({1: (verdict(1, "success", "a1"),)}) is None  # no fault anywhere: no figures
