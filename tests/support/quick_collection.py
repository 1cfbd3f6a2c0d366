"""What the quick selection collects of some test files: `pytest -p tests.support.quick --co` run for
real, as `scripts/bootstrap.sh test --quick` runs it (tests/test_docs.py, tests/test_quick.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

REPO = Path(__file__).resolve().parents[2]


class Collection(NamedTuple):
    ids: list[str]
    """The node ids collected."""
    output: str
    """pytest's whole report (its count of the deselected)."""


def quick_collection(*files: str) -> Collection:
    """What the quick run collects of `files` (paths from the repository's root)."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.support.quick", "-p", "no:cacheprovider", "--co",
         "-q", *files],
        capture_output=True, text=True, cwd=REPO, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return Collection([line for line in done.stdout.splitlines() if "::" in line], done.stdout)
