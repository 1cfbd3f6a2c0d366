"""The conformance suite: generate every group, let the oracle and us judge, compare.

The oracle's verdicts on every case are stored in oracle_verdicts.json (see
stored_verdicts.py); `prepare` generates the cases and refuses a stale file.
tests/evaluator/test_conformance.py compares our verdicts with the stored ones on every
case and re-asks the live oracle about a random sample.

Run outside pytest for a full report against the stored verdicts:
    WEBARENA_ORACLE=/path/to/oracle/python python -m scripts.support.conformance.suite   (from the checkout)
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from scripts.support.conformance import golden as g
from scripts.support.conformance import har_entries as har
from scripts.support.conformance import mutations, stored_verdicts
from scripts.support.conformance.oracle_env import default_oracle_python, official_dataset
from scripts.support.conformance.progress import say
from scripts.support.conformance.runs import (
    RunCase,
    Verdict,
    copy_runs,
    read_cases,
    read_verdicts,
    write_group,
)

DIVERGENCES_FILE = stored_verdicts.DATA / "divergences.json"


@dataclasses.dataclass(frozen=True)
class Disagreement:
    group: str
    case: str
    task_id: int
    oracle: Verdict | None
    ours: Verdict | None

    def describe(self) -> str:
        def show(v: Verdict | None) -> str:
            return f"{v.status}/{v.score:g}" if v else "no verdict"

        return (
            f"{self.group}/{self.task_id} [{self.case}]: oracle {show(self.oracle)}, ours {show(self.ours)}"
        )


@dataclasses.dataclass
class SuiteReport:
    compared: int = 0
    agreed: int = 0
    golden_total: int = 0
    golden_oracle_pass: int = 0
    known: list[Disagreement] = dataclasses.field(default_factory=list)
    unknown: list[Disagreement] = dataclasses.field(default_factory=list)
    timings: dict[str, float] = dataclasses.field(default_factory=dict)
    cases_by_kind: dict[str, int] = dataclasses.field(default_factory=dict)

    def lines(self) -> list[str]:
        rate = self.golden_oracle_pass / self.golden_total if self.golden_total else 0.0
        out = [
            f"agreement: {self.agreed}/{self.compared}",
            f"agreement counting documented divergences: {self.agreed + len(self.known)}/{self.compared}",
            f"known divergences: {len(self.known)}; unexplained disagreements: {len(self.unknown)}",
            f"golden cases passing under the oracle: {self.golden_oracle_pass}/{self.golden_total}"
            f" ({rate:.1%})",
            "timings: " + ", ".join(f"{k} {v:.1f}s" for k, v in self.timings.items()),
        ]
        out += [f"  DISAGREE {d.describe()}" for d in self.unknown]
        return out


def generate(dataset: Path, root: Path) -> dict[str, Path]:
    """Write every group as a run directory under `root`; returns group -> directory."""
    tasks = json.loads(dataset.read_text(encoding="utf-8"))
    har.reset_clock()  # the stored verdicts' digests must not depend on earlier tests in this process
    by_group: dict[str, list[RunCase]] = {name: [] for name in mutations.GROUPS}
    for task in tasks:
        targets = g.targets_for(task)
        response = g.golden_response(task)
        for name, make in mutations.GROUPS.items():
            every = mutations.SAMPLED_GROUPS.get(name, 1)
            if task["task_id"] % every:
                continue
            chosen = mutations.pick(task["task_id"], make(task, targets, response))
            if chosen is not None:
                by_group[name].append(chosen)
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.json").write_text(json.dumps(g.site_config(), indent=2), encoding="utf-8")
    directories = {}
    for name, cases in by_group.items():
        directories[name] = root / name
        write_group(directories[name], cases)
    return directories


def generated_runs(directories: dict[str, Path]) -> dict[str, tuple[str, Path]]:
    """Case id (`group/task_id`) -> (kind of case, run directory), for every generated case."""
    return {
        f"{name}/{task_id}": (case, directory / str(task_id))
        for name, directory in directories.items()
        for task_id, case in read_cases(directory).items()
    }


class StaleVerdicts(Exception):
    """The stored verdicts were made from other inputs; the message names the refresh command."""


@dataclasses.dataclass
class Generated:
    root: Path
    directories: dict[str, Path]
    runs: dict[str, Path]
    """Case id -> run directory."""
    kinds: dict[str, str]
    """Case id -> kind of case within its group."""
    stored: dict[str, Verdict | None]
    """Case id -> the oracle's stored verdict."""


def prepare(dataset: Path, oracle_python: Path, root: Path) -> Generated:
    """Every case generated under `root`, with the stored verdicts (StaleVerdicts when they are stale)."""
    fingerprint, stored = stored_verdicts.load()
    reasons = fingerprint.differences(stored_verdicts.current_fingerprint(dataset, oracle_python))
    if reasons:  # before generating: a new generator or oracle needs no digest to tell
        raise StaleVerdicts(stored_verdicts.stale_message(reasons))
    say(f"generating the conformance cases under {root}")
    directories = generate(dataset, root)
    runs = generated_runs(directories)
    current = {case_id: (kind, stored_verdicts.run_digest(run)) for case_id, (kind, run) in runs.items()}
    reasons = stored_verdicts.staleness(stored, current)
    if reasons:
        raise StaleVerdicts(stored_verdicts.stale_message(reasons))
    return Generated(
        root=root,
        directories=directories,
        runs={case_id: run for case_id, (_, run) in runs.items()},
        kinds={case_id: kind for case_id, (kind, _) in runs.items()},
        stored={case_id: case.verdict for case_id, case in stored.items()},
    )


def judge_with_us(dataset: Path, root: Path, directories: dict[str, Path]) -> dict[str, Verdict | None]:
    """Our `evaluate_directory` on copies of every group, in this process; case id -> verdict."""
    from webarena_live.evaluator.batch import evaluate_directory
    from webarena_live.evaluator.sites import SiteMap
    from webarena_live.evaluator.tasks import load_tasks

    tasks = load_tasks(dataset)
    site_map = SiteMap.load(root / "config.json")
    workspace = Path(tempfile.mkdtemp(prefix="ours-", dir=root))
    verdicts: dict[str, Verdict | None] = {}
    try:
        for name, directory in directories.items():
            copy = workspace / name
            copy_runs(directory, copy)
            evaluate_directory(copy, tasks, site_map)
            found = read_verdicts(copy)
            verdicts.update({f"{name}/{task_id}": found.get(task_id) for task_id in read_cases(directory)})
    finally:
        shutil.rmtree(workspace, ignore_errors=True)
    return verdicts


def load_divergences() -> list[dict[str, Any]]:
    return json.loads(DIVERGENCES_FILE.read_text(encoding="utf-8"))["divergences"]


def _is_known(d: Disagreement, known: list[dict[str, Any]], oracle: dict[str, Verdict | None]) -> bool:
    for entry in known:
        if entry["case"] != d.case or entry.get("group", d.group) != d.group:
            continue
        if entry["task_id"] not in ("*", d.task_id):
            continue
        if not (
            d.oracle and d.ours and entry["oracle"] == d.oracle.status and entry["ours"] == d.ours.status
        ):
            continue
        # "Ours must equal what the oracle says about the same run in another group" (e.g. the seed's
        # field names must be judged exactly like the official ones).
        reference_group = entry.get("ours_equals_oracle_in")
        if reference_group and oracle.get(f"{reference_group}/{d.task_id}") != d.ours:
            continue
        return True
    return False


def compare(
    kinds: dict[str, str], oracle: dict[str, Verdict | None], ours: dict[str, Verdict | None]
) -> SuiteReport:
    """Every case (case id -> kind of case): the oracle's verdict against ours."""
    report = SuiteReport()
    known = load_divergences()
    for case_id, case in sorted(kinds.items()):
        name, task_id = case_id.split("/")
        kind = f"{name}:{case}"
        report.cases_by_kind[kind] = report.cases_by_kind.get(kind, 0) + 1
        theirs, mine = oracle.get(case_id), ours.get(case_id)
        if name == "golden":
            report.golden_total += 1
            report.golden_oracle_pass += bool(theirs and theirs.status == "success")
        report.compared += 1
        if theirs == mine:
            report.agreed += 1
            continue
        disagreement = Disagreement(name, case, int(task_id), theirs, mine)
        (report.known if _is_known(disagreement, known, oracle) else report.unknown).append(disagreement)
    return report


def main() -> int:
    """Our verdicts against the stored ones on every case, with a per-kind count."""
    oracle_python = default_oracle_python()
    dataset = official_dataset(oracle_python)
    with tempfile.TemporaryDirectory(prefix="conformance-") as tmp:
        try:
            generated = prepare(dataset, oracle_python, Path(tmp))
        except StaleVerdicts as stale:
            print(stale)
            return 1
        started = time.perf_counter()
        ours = judge_with_us(dataset, generated.root, generated.directories)
    report = compare(generated.kinds, generated.stored, ours)
    report.timings["ours"] = time.perf_counter() - started
    print("\n".join(report.lines()))
    for kind, count in sorted(report.cases_by_kind.items()):
        print(f"  {kind}: {count}")
    return 0 if not report.unknown else 1


if __name__ == "__main__":
    sys.exit(main())
