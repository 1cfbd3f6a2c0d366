"""The quick selection's second rule (tests/support/quick.py): the slow kinds of `serve` test it leaves
out, read from the code and the parameters, and the parity corpora's cases it samples."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import quick
from tests.support.quick import WHOLE, heavy_names
from tests.support.quick_collection import quick_collection

REPO = Path(__file__).resolve().parent.parent
TESTS = REPO / "tests"


def test_fleets_crashes_other_trees_and_the_wheel_are_read_from_the_code():
    faults = heavy_names(TESTS / "proxy" / "test_faults.py")
    assert "--workers" in faults["test_faults_reach_the_workers_of_a_fleet"]  # `serve ... "--workers", "2"`
    assert "test_draws_are_a_function_of_their_inputs_only" not in faults
    assert (
        "LocalWorkers("
        in heavy_names(TESTS / "fleet" / "test_worker_ports.py")[
            "test_a_first_start_that_fails_otherwise_keeps_its_ports_and_says_why"
        ]
    )
    crash = heavy_names(TESTS / "runs" / "test_reliability_crash.py")
    assert "SIGKILL" in crash["test_sigkill_mid_session_then_resume_from_the_journal"]
    resume = heavy_names(TESTS / "proxy" / "test_fault_resume.py")
    assert WHOLE not in resume  # its docstring names SIGKILL: only the tests that kill are slow
    assert "test_a_fault_cut_off_by_the_crash_is_drawn_again_and_listed_once" in resume
    assert "test_a_faults_file_reads_back_in_order_without_a_line_a_crash_cut_short" not in resume
    assert (
        "HEAD"
        in heavy_names(TESTS / "proxy" / "test_bench_proxy.py")[
            "test_with_another_tree_its_serve_is_the_baseline_of_the_same_rounds"
        ]
    )
    assert WHOLE in heavy_names(TESTS / "support" / "wheel.py")
    assert "installed_wheel" in heavy_names(TESTS / "commands" / "conftest.py")


def test_a_fleet_named_in_a_parameter_leaves_only_that_parameters_tests_out():
    collected = quick_collection(
        "tests/control/test_token_words.py",
        "tests/control/test_abandon_body.py",
        "tests/proxy/test_fault_resume.py",
    ).ids
    assert (
        "tests/control/test_token_words.py::test_a_401_names_the_variable_the_token_comes_from[one process]"
        in (collected)
    )
    assert not [line for line in collected if "fleet" in line or "two workers" in line], collected
    assert any("test_abandon_body.py" in line and "[one process]" in line for line in collected), collected
    resumed = [line for line in collected if "test_fault_resume.py" in line]
    assert resumed and not [line for line in resumed if "crash_keeps" in line or "cut_off_by" in line], (
        resumed
    )


def test_the_sample_keeps_every_strideth_case_of_each_kind_and_every_kind():
    cases = [("a", n) for n in range(20)] + [("b", n) for n in range(3)] + [("c", 0)]
    cases.sort(key=lambda case: case[1])  # the kinds interleaved: each is counted on its own
    chosen = quick.sample(cases, lambda case: case[0], quick=True)
    stride = quick.STRIDE
    assert chosen == sorted(
        [("a", n) for n in range(0, 20, stride)] + [("b", 0), ("c", 0)], key=lambda case: case[1]
    )
    assert {kind for kind, _ in chosen} == {"a", "b", "c"}
    assert quick.sample(cases, lambda case: case[0], quick=True) == chosen  # the same every run
    assert quick.sample(cases, lambda case: case[0], quick=False) == cases


@pytest.mark.parametrize("running", [False, True], ids=["full run", "quick run"])
def test_the_full_run_keeps_every_case_and_example_and_a_quick_run_fewer(
    monkeypatch: pytest.MonkeyPatch, running: bool
):
    monkeypatch.setattr(quick, "_running", running)
    cases = list(range(100))
    kept = quick.sample(cases, lambda _: "one kind")
    if running:
        assert kept == cases[:: quick.STRIDE] and quick.share(800) == 800 // quick.STRIDE
        assert quick.examples(50) == 10 and quick.examples(15) == 5
    else:
        assert kept == cases and quick.share(800) == 800 and quick.examples(50) == 50
