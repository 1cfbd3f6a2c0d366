"""Verdict parity with the reference evaluator (webarena-verified 1.2.3) on all 812 official tasks.

For every task the suite generates a golden run and mutated runs (see
tests/conformance/), lets the oracle judge them with its own batch command,
judges copies with `evaluate_directory`, and compares status and score case by
case. A disagreement fails the test unless tests/conformance/divergences.json
lists it (with both verdicts and the reason ours is kept).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conformance.mutations import GROUPS
from conformance.suite import run_suite


@pytest.mark.timeout(1200)
def test_verdicts_match_the_oracle_on_every_generated_case(
    oracle_python: Path, official_dataset: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = run_suite(official_dataset, oracle_python)
    with capsys.disabled():  # the agreement figure is shown even when the test passes
        print("\n" + "\n".join(report.lines()))

    assert report.golden_total == 812
    golden_rate = report.golden_oracle_pass / report.golden_total
    assert golden_rate >= 0.95, f"golden runs pass under the oracle for only {golden_rate:.1%} of tasks"
    # Every mutation group contributed, so a generator regression cannot silently shrink the suite.
    groups = {kind.split(":", 1)[0] for kind in report.cases_by_kind}
    assert groups == set(GROUPS) and report.compared > 6000
    assert not report.unknown, "verdicts differ from the oracle:\n" + "\n".join(
        d.describe() for d in report.unknown
    )
