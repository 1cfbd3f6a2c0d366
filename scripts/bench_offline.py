#!/usr/bin/env python
"""`webarena-live evaluate` vs the reference's `webarena-verified eval-tasks`, side by side.

Builds one run directory for all 812 official tasks (golden answers and
Chromium-shaped HARs from the conformance generator), copies it twice, and
times both command lines end to end on their copy (process start-up included),
then checks that both wrote the same verdicts. Target: ours at least 5x faster.

    .venv/bin/python scripts/bench_offline.py [--quick] [--oracle /path/to/oracle/bin/python]
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # scripts.support.conformance, the corpus the tests share

from scripts.support.conformance import golden as g  # noqa: E402
from scripts.support.conformance.oracle_env import default_oracle_python, official_dataset  # noqa: E402
from scripts.support.conformance.runs import RunCase, copy_runs, read_verdicts, write_group  # noqa: E402


def build_runs(dataset: Path, directory: Path, limit: int | None) -> int:
    tasks = json.loads(dataset.read_text(encoding="utf-8"))[:limit]
    cases = [
        RunCase(t["task_id"], "golden", g.golden_response(t), g.build_entries(t, g.targets_for(t)))
        for t in tasks
    ]
    write_group(directory, cases)
    return len(cases)


def timed(command: list[str]) -> tuple[float, float]:
    """Wall-clock seconds and CPU seconds (user + system) of one command line."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="only the first 100 tasks")
    parser.add_argument(
        "--oracle", type=Path, default=default_oracle_python(), help="python of the oracle's venv"
    )
    args = parser.parse_args()

    dataset = official_dataset(args.oracle)
    with tempfile.TemporaryDirectory(prefix="bench-offline-") as temp:
        root = Path(temp)
        count = build_runs(dataset, root / "source", 100 if args.quick else None)
        config = root / "config.json"
        config.write_text(json.dumps(g.site_config()))
        copy_runs(root / "source", root / "ours")
        copy_runs(root / "source", root / "oracle")

        ours_cli = shutil.which("webarena-live", path=str(Path(sys.executable).parent)) or "webarena-live"
        ours = timed([ours_cli, "evaluate", "--output-dir", str(root / "ours"), "--tasks", str(dataset),
                      "--config", str(config)])  # fmt: skip
        reference = timed([str(args.oracle.parent / "webarena-verified"), "eval-tasks",
                           "--output-dir", str(root / "oracle"), "--config", str(config)])  # fmt: skip

        ours_verdicts, oracle_verdicts = read_verdicts(root / "ours"), read_verdicts(root / "oracle")
        same = sum(ours_verdicts.get(task_id) == verdict for task_id, verdict in oracle_verdicts.items())

    print(f"run directory: {count} tasks (golden runs, Chromium-shaped HARs)")
    for name, (wall, cpu) in (("webarena-live evaluate", ours), ("webarena-verified eval-tasks", reference)):
        print(f"{name:<30} wall {wall:7.2f} s ({wall / count * 1000:6.1f} ms/task)   cpu {cpu:7.2f} s")
    wall_ratio, cpu_ratio = reference[0] / ours[0], reference[1] / ours[1]
    print(f"speed-up: {wall_ratio:.1f}x wall-clock, {cpu_ratio:.1f}x CPU (target >= 5x)")
    print(f"same verdicts: {same}/{len(oracle_verdicts)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
