"""The conformance suite: generate every group, let the oracle and us judge, compare.

Generated runs and the oracle's verdicts are cached under a directory keyed by
a hash of the generator's sources, the dataset and the oracle's location, so a
re-run only re-evaluates our side. Set WEBARENA_CONFORMANCE_FRESH=1 to ignore
the cache (CI starts from an empty machine anyway).

Run outside pytest for a full report:
    WEBARENA_ORACLE=/path/to/oracle/python python -m conformance.suite   (from tests/)
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from conformance import golden as g
from conformance import mutations
from conformance.oracle_env import default_oracle_python, official_dataset
from conformance.runs import RunCase, Verdict, copy_runs, read_cases, read_verdicts, run_oracle, write_group

HERE = Path(__file__).resolve().parent
DIVERGENCES_FILE = HERE / "divergences.json"


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


def source_hash(dataset: Path, oracle_python: Path) -> str:
    digest = hashlib.sha256()
    for source in sorted(HERE.glob("*.py")):
        if source.name != "suite.py":
            digest.update(source.read_bytes())
    digest.update(dataset.read_bytes())
    digest.update(str(oracle_python).encode())
    return digest.hexdigest()[:16]


def cache_root(key: str) -> Path:
    base = Path(
        os.environ.get(
            "WEBARENA_CONFORMANCE_CACHE", Path(tempfile.gettempdir()) / "webarena-live-conformance"
        )
    )
    return base / key


def generate(dataset: Path, root: Path) -> dict[str, Path]:
    """Write every group as a run directory under `root`; returns group -> directory."""
    tasks = json.loads(dataset.read_text(encoding="utf-8"))
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
    (root / "config.json").write_text(json.dumps(g.site_config(), indent=2), encoding="utf-8")
    directories = {}
    for name, cases in by_group.items():
        directories[name] = root / name
        write_group(directories[name], cases)
    return directories


def judge_with_oracle(oracle_python: Path, directories: dict[str, Path], config: Path) -> None:
    """Run the oracle's batch command on every group, as many at a time as there are CPUs."""
    pending = list(directories.values())
    running: list[subprocess.Popen[bytes]] = []
    slots = max(1, os.cpu_count() or 1)
    while pending or running:
        while pending and len(running) < slots:
            running.append(run_oracle(oracle_python, pending.pop(0), config))
        time.sleep(0.2)
        still = []
        for process in running:
            if process.poll() is None:
                still.append(process)
            elif process.returncode != 0:
                raise RuntimeError(f"oracle eval-tasks failed (exit {process.returncode}): {process.args!r}")
        running = still


def prepare(dataset: Path, oracle_python: Path) -> tuple[Path, dict[str, Path], dict[str, float]]:
    """Generated groups with the oracle's verdicts, from the cache when it is complete.

    An exclusive lock serializes concurrent test sessions sharing the cache:
    the second one waits and then reuses what the first one built.
    """
    root = cache_root(source_hash(dataset, oracle_python))
    root.parent.mkdir(parents=True, exist_ok=True)
    with (root.parent / f"{root.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _prepare_locked(root, dataset, oracle_python)


def _prepare_locked(
    root: Path, dataset: Path, oracle_python: Path
) -> tuple[Path, dict[str, Path], dict[str, float]]:
    timings: dict[str, float] = {}
    done = root / "oracle-done"
    if os.environ.get("WEBARENA_CONFORMANCE_FRESH") and root.exists():
        shutil.rmtree(root)
    if done.exists():
        return root, {name: root / name for name in mutations.GROUPS}, timings
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    started = time.perf_counter()
    directories = generate(dataset, root)
    timings["generate"] = time.perf_counter() - started
    started = time.perf_counter()
    judge_with_oracle(oracle_python, directories, root / "config.json")
    timings["oracle"] = time.perf_counter() - started
    done.write_text("ok\n")
    return root, directories, timings


def judge_with_us(dataset: Path, root: Path, directories: dict[str, Path]) -> dict[str, Path]:
    """Copies of every group judged by `evaluate_directory`, in this process."""
    from webarena_live.evaluator.batch import evaluate_directory
    from webarena_live.evaluator.sites import SiteMap
    from webarena_live.evaluator.tasks import load_tasks

    tasks = load_tasks(dataset)
    site_map = SiteMap.load(root / "config.json")
    workspace = Path(tempfile.mkdtemp(prefix="ours-", dir=root))  # private to this session
    ours = {}
    for name, directory in directories.items():
        copy = workspace / name
        copy_runs(directory, copy)
        evaluate_directory(copy, tasks, site_map)
        ours[name] = copy
    return ours


def load_divergences() -> list[dict[str, Any]]:
    return json.loads(DIVERGENCES_FILE.read_text(encoding="utf-8"))["divergences"]


def _is_known(
    d: Disagreement, known: list[dict[str, Any]], oracle_by_group: dict[str, dict[int, Verdict]]
) -> bool:
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
        if reference_group and oracle_by_group[reference_group].get(d.task_id) != d.ours:
            continue
        return True
    return False


def compare(directories: dict[str, Path], ours: dict[str, Path]) -> SuiteReport:
    report = SuiteReport()
    known = load_divergences()
    oracle_by_group = {name: read_verdicts(directory) for name, directory in directories.items()}
    for name, directory in directories.items():
        cases = read_cases(directory)
        oracle_verdicts = oracle_by_group[name]
        our_verdicts = read_verdicts(ours[name])
        for task_id, case in sorted(cases.items()):
            kind = f"{name}:{case}"
            report.cases_by_kind[kind] = report.cases_by_kind.get(kind, 0) + 1
            theirs, mine = oracle_verdicts.get(task_id), our_verdicts.get(task_id)
            if name == "golden":
                report.golden_total += 1
                report.golden_oracle_pass += bool(theirs and theirs.status == "success")
            report.compared += 1
            if theirs == mine:
                report.agreed += 1
                continue
            disagreement = Disagreement(name, case, task_id, theirs, mine)
            is_known = _is_known(disagreement, known, oracle_by_group)
            (report.known if is_known else report.unknown).append(disagreement)
    return report


def run_suite(dataset: Path, oracle_python: Path) -> SuiteReport:
    root, directories, timings = prepare(dataset, oracle_python)
    started = time.perf_counter()
    ours = judge_with_us(dataset, root, directories)
    timings["ours"] = time.perf_counter() - started
    try:
        report = compare(directories, ours)
    finally:
        shutil.rmtree(next(iter(ours.values())).parent, ignore_errors=True)
    report.timings = timings
    return report


def main() -> int:
    oracle_python = default_oracle_python()
    dataset = official_dataset(oracle_python)
    report = run_suite(dataset, oracle_python)
    print("\n".join(report.lines()))
    for kind, count in sorted(report.cases_by_kind.items()):
        print(f"  {kind}: {count}")
    return 0 if not report.unknown else 1


if __name__ == "__main__":
    sys.exit(main())
