"""Verdict parity with the reference evaluator (webarena-verified 1.2.3) on all 812 official tasks.

For every task the suite generates a golden run and mutated runs (see
scripts/support/conformance/). The reference's verdicts on all of them are stored in
tests/conformance/oracle_verdicts.json (scripts/refresh_oracle_verdicts.py
writes it; a stale file fails here, naming that command). Every run:
- our `evaluate_directory` judges every case, compared with the stored verdict;
  a disagreement fails unless tests/conformance/divergences.json lists it;
- the live reference's own batch command re-judges a fresh random sample of at
  least 300 stored cases (every kind of case included, seed printed), and any
  difference from the stored verdicts fails.
A quick run (tests/support/quick.py) generates every case and checks the stored file against all of
them, but judges only `quick.sample`'s share of each kind, and asks the live reference about fewer.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from scripts.support.conformance import sample, stored_verdicts, suite
from scripts.support.conformance.mutations import GROUPS
from scripts.support.conformance.oracle_batch import OracleBatch
from scripts.support.conformance.progress import say
from scripts.support.conformance.runs import Verdict, read_cases
from tests.support import quick

LIVE_SAMPLE = quick.share(sample.SAMPLE_SIZE)
"""Cases the live reference re-judges (at least two of each kind, whatever the size)."""


@pytest.fixture(scope="module")
def generated(
    official_dataset: Path, oracle_python: Path, tmp_path_factory: pytest.TempPathFactory
) -> suite.Generated:
    try:
        return suite.prepare(official_dataset, oracle_python, tmp_path_factory.mktemp("conformance"))
    except suite.StaleVerdicts as stale:
        pytest.fail(str(stale), pytrace=False)


@pytest.fixture(scope="module")
def live_sample(generated: suite.Generated, oracle_python: Path) -> Iterator[tuple[int, OracleBatch]]:
    """The live oracle at work on a random sample, started in the background (see the first test)."""
    seed = sample.seed_from_environment()
    chosen = sample.choose(generated.kinds, seed, LIVE_SAMPLE)
    say(f"live oracle sample: {len(chosen)} cases, seed {seed} (WEBARENA_CONFORMANCE_SEED={seed} redraws it)")
    batch = OracleBatch(
        oracle_python,
        {case_id: generated.runs[case_id] for case_id in chosen},
        generated.root / "config.json",
        generated.root / "live-sample",
    )
    yield seed, batch
    batch.verdicts()  # never leave the oracle running past this module


def judged(generated: suite.Generated) -> tuple[dict[str, Path], dict[str, str]]:
    """The groups' directories our evaluator judges and their cases (case id -> kind): every case, or in
    a quick run `quick.sample`'s share of each kind, copied to directories of their own."""
    chosen = set(quick.sample(sorted(generated.kinds, key=_in_order), lambda case: _kind(generated, case)))
    if chosen == set(generated.kinds):
        return generated.directories, generated.kinds
    directories = {}
    for group, directory in generated.directories.items():
        directories[group] = generated.root / "quick-sample" / group
        cases = {task: kind for task, kind in read_cases(directory).items() if f"{group}/{task}" in chosen}
        for task_id in cases:
            shutil.copytree(directory / str(task_id), directories[group] / str(task_id))
        (directories[group] / "cases.json").write_text(json.dumps(cases, indent=1), encoding="utf-8")
    return directories, {case: generated.kinds[case] for case in sorted(chosen)}


def _in_order(case: str) -> tuple[str, int]:
    group, task_id = case.split("/")
    return group, int(task_id)


def _kind(generated: suite.Generated, case: str) -> str:
    return f"{case.split('/')[0]}:{generated.kinds[case]}"


def test_our_verdicts_match_the_stored_oracle_verdicts_on_every_case(
    official_dataset: Path,
    generated: suite.Generated,
    live_sample: tuple[int, OracleBatch],  # started first: the oracle works while we judge
    capsys: pytest.CaptureFixture[str],
) -> None:
    directories, kinds = judged(generated)
    say(f"judging {len(kinds)} of the {len(generated.runs)} cases with our evaluator")
    started = time.perf_counter()
    ours = suite.judge_with_us(official_dataset, generated.root, directories)
    report = suite.compare(kinds, generated.stored, ours)
    report.timings["ours"] = time.perf_counter() - started
    with capsys.disabled():  # the agreement figure is shown even when the test passes
        print("\n" + "\n".join(report.lines()))

    assert report.golden_total == 812 if not quick.running() else report.golden_total >= quick.share(812)
    golden_rate = report.golden_oracle_pass / report.golden_total
    assert golden_rate >= 0.95, f"golden runs pass under the oracle for only {golden_rate:.1%} of tasks"
    # Every mutation group contributed, so a generator regression cannot silently shrink the suite.
    groups = {kind.split(":", 1)[0] for kind in report.cases_by_kind}
    assert groups == set(GROUPS) and report.compared > quick.share(6000)
    assert not report.unknown, "verdicts differ from the oracle:\n" + "\n".join(
        d.describe() for d in report.unknown
    )


def test_the_live_oracle_gives_the_stored_verdicts_on_a_random_sample(
    generated: suite.Generated, live_sample: tuple[int, OracleBatch]
) -> None:
    seed, batch = live_sample
    live = batch.verdicts()
    assert len(live) >= LIVE_SAMPLE
    assert {case_id.split("/")[0] for case_id in live} == set(GROUPS)
    differences = [
        f"{case_id} [{generated.kinds[case_id]}]: live {verdict}, stored {generated.stored[case_id]}"
        for case_id, verdict in sorted(live.items())
        if verdict != generated.stored[case_id]
    ]
    assert not differences, (
        f"the live oracle disagrees with the stored verdicts (seed {seed}; rerun with "
        f"WEBARENA_CONFORMANCE_SEED={seed}):\n" + "\n".join(differences)
    )


def test_the_stored_file_is_stale_when_its_inputs_change() -> None:
    """The check behind the fixture above, on made-up cases: each kind of change is named."""
    stored = {
        "golden/1": stored_verdicts.StoredCase("golden", Verdict("success", 1.0), "aaa"),
        "golden/2": stored_verdicts.StoredCase("golden", Verdict("failure", 0.0), "bbb"),
    }
    same = {"golden/1": ("golden", "aaa"), "golden/2": ("golden", "bbb")}
    assert stored_verdicts.staleness(stored, same) == []
    changed = {"golden/1": ("golden", "zzz"), "golden/3": ("golden", "ccc")}
    reasons = stored_verdicts.staleness(stored, changed)
    assert [reason.split(" ", 1)[1].split(",")[0] for reason in reasons] == [
        "generated cases have no stored verdict",
        "stored cases are no longer generated",
        "cases have other inputs than when stored",
    ]
    before = stored_verdicts.Fingerprint(generator="g1", oracle="1.2.3", dataset="d")
    after = stored_verdicts.Fingerprint(generator="g2", oracle="1.2.4", dataset="d")
    assert before.differences(after) == ["generator: stored g1, now g2", "oracle: stored 1.2.3, now 1.2.4"]
    assert stored_verdicts.REFRESH_COMMAND in stored_verdicts.stale_message(before.differences(after))
