"""`scripts/bench_hooks.py`: the hooks' CPU per flow, in process, run for real on a few flows."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "bench_hooks.py"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300)


def test_it_drives_flows_through_the_configured_addon_and_reports_a_figure_per_run() -> None:
    done = run("--runs", "2", "--batches", "2", "--flows", "40")
    assert done.returncode == 0, done.stderr
    line = next(line for line in done.stdout.splitlines() if "this tree" in line)
    figures = [float(f) for f in re.findall(r"[\d.]+", line.partition("[")[2].partition("]")[0])]
    assert len(figures) == 2 and all(0 < figure < 10_000 for figure in figures)
    assert "webarena_live" in line  # where the measured package came from


def test_another_tree_without_the_package_is_a_clear_error(tmp_path: Path) -> None:
    done = run("--other", str(tmp_path), "--runs", "1")
    assert done.returncode != 0 and f"{tmp_path} holds no webarena_live/ package" in done.stderr


def test_another_tree_named_by_a_commit_is_exported_and_measured_beside_this_one() -> None:
    done = run("--other", "HEAD", "--runs", "1", "--batches", "1", "--flows", "20")
    assert done.returncode == 0, done.stderr
    other = next(line for line in done.stdout.splitlines() if "other tree:" in line)
    assert re.search(r"bench-hooks-tree-\w+/other-tree-\w+/webarena_live\)$", other), other
    assert "this tree / other tree:" in done.stdout


def test_a_name_that_is_no_commit_is_a_clear_error() -> None:
    done = run("--other", "no-such-commit-anywhere", "--runs", "1")
    assert done.returncode != 0 and "no-such-commit-anywhere is no directory and no commit" in done.stderr
