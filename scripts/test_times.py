"""Where a test run's time goes: per test file and per folder, from pytest's JUnit XML reports.

`scripts/bootstrap.sh test` writes one report per suite (`--junitxml`) and prints this table after the
suites, so every CI log says which files the time went to. A test's time in the report is its set-up,
call and tear-down together (pytest's default `junit_duration_report`), so a module's shared fixture
(a real application started once, a Ray cluster) counts in the file that starts it. Under pytest-xdist
the files run side by side: the sum of the test seconds is CPU-bound work spread over the cores, not
the wall time (the script prints both, the wall time as the report's own `time`).

    .venv/bin/python scripts/test_times.py REPORT.xml [REPORT.xml ...] [--most 20]
"""

from __future__ import annotations

import argparse
import xml.etree.ElementTree as ElementTree
from collections import Counter
from pathlib import Path


def test_file(classname: str) -> str:
    """The module a test case's class name names: `tests.e2e.test_pool_leases.TestSomething` -> its file."""
    parts = classname.split(".")
    while len(parts) > 1 and not parts[-1].startswith("test_"):
        parts.pop()  # a test class inside the module
    return "/".join(parts) + ".py"


def slowest_first(spent: dict[str, float]) -> list[tuple[str, float]]:
    return sorted(spent.items(), key=lambda item: -item[1])


def summary(report: Path, most: int) -> list[str]:
    root = ElementTree.parse(report).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    seconds: dict[str, float] = {}
    counts: Counter[str] = Counter()
    for case in root.iter("testcase"):
        name = test_file(case.get("classname") or "?")
        seconds[name] = seconds.get(name, 0.0) + float(case.get("time") or 0)
        counts[name] += 1
    wall = sum(float(suite.get("time") or 0) for suite in suites)
    folders: dict[str, float] = {}
    for name, spent in seconds.items():
        folder = name.rsplit("/", 1)[0]
        folders[folder] = folders.get(folder, 0.0) + spent
    total = sum(seconds.values())
    lines = [
        f"{report.name}: {sum(counts.values())} tests, {total:.0f} test-seconds (set-up and tear-down "
        f"included) in {wall:.0f} s of wall time",
        "  by folder: " + ", ".join(f"{folder} {spent:.0f} s" for folder, spent in slowest_first(folders)),
        f"  the {min(most, len(seconds))} slowest files:",
    ]
    lines += [
        f"  {spent:7.1f} s {spent / total:6.1%} {counts[name]:4} tests  {name}"
        for name, spent in slowest_first(seconds)[:most]
    ]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="+", type=Path)
    parser.add_argument("--most", type=int, default=20, help="how many files to list per report")
    args = parser.parse_args()
    for report in args.reports:
        if not report.is_file():
            print(f"{report}: no report (the suite did not run to its end)")
            continue
        print("\n".join(summary(report, args.most)))


if __name__ == "__main__":
    main()
