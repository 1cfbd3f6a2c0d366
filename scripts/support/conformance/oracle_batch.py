"""The reference's own batch command, `eval-tasks`, over any set of generated runs, in parallel.

`eval-tasks` judges one directory of runs named by task id, so the runs are
packed into directories in which each task id appears once, and as many of
those are judged at a time as this process may use CPUs. The work starts in
the background: the caller can judge with our evaluator meanwhile.
"""

from __future__ import annotations

import os
import shutil
import time
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from pathlib import Path

from scripts.support.conformance.progress import say
from scripts.support.conformance.runs import Verdict, read_verdicts, run_oracle


def usable_cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def pack(runs: dict[str, Path], size: int) -> list[dict[str, Path]]:
    """Case id -> run directory, split into bins with no task id twice in a bin.

    A bin takes about `size` runs; one goes over rather than a new bin being opened only for a
    task id that every other bin already holds (each bin costs an oracle start-up).
    """
    bins: list[tuple[dict[str, Path], set[str]]] = []
    for case_id, run in runs.items():
        free = [(chosen, task_ids) for chosen, task_ids in bins if run.name not in task_ids]
        roomy = [(chosen, task_ids) for chosen, task_ids in free if len(chosen) < size]
        if roomy or free:
            chosen, task_ids = (roomy or free)[0]
        else:
            chosen, task_ids = {}, set()
            bins.append((chosen, task_ids))
        chosen[case_id] = run
        task_ids.add(run.name)
    return [chosen for chosen, _ in bins]


class OracleBatch:
    """The oracle judging copies of `runs` (case id -> run directory) under `workdir`, in the background."""

    def __init__(
        self,
        oracle_python: Path,
        runs: dict[str, Path],
        config: Path,
        workdir: Path,
        bins_per_cpu: int = 1,
    ) -> None:
        cpus = usable_cpus()
        # Several bins per CPU keep every CPU busy to the end when bins take unequal times.
        size = max(1, -(-len(runs) // (cpus * bins_per_cpu)))
        self._bins: list[tuple[Path, dict[str, Path]]] = []
        for number, chosen in enumerate(pack(runs, size)):
            directory = workdir / f"oracle-{number}"
            directory.mkdir(parents=True)
            for run in chosen.values():
                shutil.copytree(run, directory / run.name, ignore=shutil.ignore_patterns("eval_result*.json"))
            self._bins.append((directory, chosen))
        self._total = len(runs)
        self._found: dict[str, Verdict | None] | None = None
        self._started = time.perf_counter()
        self._pool = ThreadPoolExecutor(max_workers=cpus)
        self._futures: dict[Future[int], tuple[Path, dict[str, Path]]] = {
            self._pool.submit(self._judge, oracle_python, directory, config, len(chosen)): (directory, chosen)
            for directory, chosen in self._bins
        }
        say(f"oracle: judging {self._total} cases in {len(self._bins)} directories, {cpus} at a time")

    def verdicts(self) -> dict[str, Verdict | None]:
        """Waits for the oracle; case id -> its verdict (None when it wrote none)."""
        if self._found is None:
            self._found = self._wait()
        return self._found

    def _wait(self) -> dict[str, Verdict | None]:
        found: dict[str, Verdict | None] = {}
        try:
            for future in as_completed(self._futures):
                directory, chosen = self._futures[future]
                if future.result() != 0:
                    raise RuntimeError(f"oracle eval-tasks failed on {directory}: see {directory}/oracle.log")
                written = read_verdicts(directory)
                found.update({case_id: written.get(int(run.name)) for case_id, run in chosen.items()})
        finally:
            self._pool.shutdown(cancel_futures=True)
        return found

    def _judge(self, oracle_python: Path, directory: Path, config: Path, cases: int) -> int:
        """One `eval-tasks` (in a worker thread); says when it is done, as a progress line."""
        status = run_oracle(oracle_python, directory, config).wait()
        elapsed = time.perf_counter() - self._started
        say(f"oracle: {directory.name} done, {cases} cases, {elapsed:.0f}s after the start (exit {status})")
        return status
