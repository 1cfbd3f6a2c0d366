"""Two runs of the same tasks compared pairwise: which tasks flipped, the paired difference of the
success rates with its interval, the exact McNemar test (`evaluator/stats.py`).

A task's verdict in a run is its last attempt's (the task folder's, which the reference's tooling
judges): a pair needs one outcome per task and run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from webarena_live.evaluator.run_report import RunReport
from webarena_live.evaluator.run_verdicts import Verdict
from webarena_live.evaluator.stats import mcnemar_exact_p, paired_difference


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
