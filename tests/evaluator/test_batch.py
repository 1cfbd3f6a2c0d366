"""Offline batch evaluation (`evaluate_directory`, `webarena-live evaluate`) on real run directories.

Runs are generated from official tasks by the conformance generator (the
golden answer and a Chromium-shaped HAR), then broken on purpose.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from scripts.support.conformance import golden as g
from scripts.support.conformance.runs import RawText, RunCase, write_group
from tests.support.paths import REPO
from webarena_live.evaluator.batch import (
    RESULT_FILE,
    SUMMARY_FILE,
    discover_runs,
    evaluate_directory,
    summarize,
)
from webarena_live.evaluator.results import EvalStatus, TaskResult
from webarena_live.evaluator.sites import SiteMap
from webarena_live.evaluator.tasks import load_tasks

# A retrieve task (response only), a mutate task (form POST), a navigate task, and a two-site task.
TASK_IDS = (0, 492, 44, 267)


@pytest.fixture(scope="module")
def dataset(official_dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small dataset file cut from the official one."""
    tasks = [t for t in json.loads(official_dataset.read_text()) if t["task_id"] in TASK_IDS]
    path = tmp_path_factory.mktemp("dataset") / "tasks.json"
    path.write_text(json.dumps(tasks))
    return path


def _golden_cases(dataset: Path) -> list[RunCase]:
    cases = []
    for task in json.loads(dataset.read_text()):
        entries = g.build_entries(task, g.targets_for(task))
        cases.append(RunCase(task["task_id"], "golden", g.golden_response(task), entries))
    return cases


@pytest.fixture
def run_dir(tmp_path: Path, dataset: Path) -> Path:
    directory = tmp_path / "runs"
    write_group(directory, _golden_cases(dataset))
    (tmp_path / "config.json").write_text(json.dumps(g.site_config()))
    return directory


def _site_map(run_dir: Path) -> SiteMap:
    return SiteMap.load(run_dir.parent / "config.json")


def test_golden_runs_succeed_and_results_are_written(run_dir: Path, dataset: Path) -> None:
    seen: list[TaskResult] = []
    report = evaluate_directory(run_dir, load_tasks(dataset), _site_map(run_dir), on_result=seen.append)
    assert [r.task_id for r in report.results] == sorted(TASK_IDS)
    assert [r.task_id for r in seen] == sorted(TASK_IDS)
    assert {r.task_id: r.status for r in report.results} == dict.fromkeys(TASK_IDS, EvalStatus.SUCCESS)
    for task_id in TASK_IDS:
        written = json.loads((run_dir / str(task_id) / RESULT_FILE).read_text())
        assert written["task_id"] == task_id and written["status"] == "success" and written["score"] == 1.0
        assert written["webarena_verified_data_checksum"] == load_tasks(dataset).checksum
        assert (run_dir / str(task_id) / RESULT_FILE).stat().st_mode & 0o777 == 0o644
    assert not list(run_dir.rglob("*.tmp")), "atomic writes leave no temporary files behind"
    summary = json.loads((run_dir / SUMMARY_FILE).read_text())["summary"]
    assert summary["overall"]["success_count"] == len(TASK_IDS)
    assert set(summary["per_site"]) == {"shopping_admin", "gitlab", "map-wikipedia"}


def test_broken_inputs_become_error_results_naming_the_file(run_dir: Path, dataset: Path) -> None:
    (run_dir / "0" / "network.har").write_text('{"log": {"entries": [')
    (run_dir / "492" / "agent_response.json").write_bytes(b"\xff\xfe not utf-8 \x80")
    unknown = run_dir / "99999"
    unknown.mkdir()
    (unknown / "agent_response.json").write_text("{}")
    (unknown / "network.har").write_text("{}")
    (run_dir / "44" / "network.har").unlink()  # incomplete run: skipped, like the reference

    report = evaluate_directory(run_dir, load_tasks(dataset), _site_map(run_dir))
    by_id = {r.task_id: r for r in report.results}
    assert report.skipped_task_ids == (44,)
    assert set(by_id) == {0, 267, 492, 99999}
    assert by_id[267].status == EvalStatus.SUCCESS
    for task_id, file_name in ((0, "network.har"), (492, "agent_response.json"), (99999, "99999")):
        assert by_id[task_id].status == EvalStatus.ERROR and by_id[task_id].score == 0.0
        assert file_name in (by_id[task_id].error_msg or ""), by_id[task_id].error_msg
        assert (run_dir / str(task_id) / RESULT_FILE).exists()
    assert by_id[99999].intent_template_id == -1 and "not in the dataset" in (by_id[99999].error_msg or "")
    assert by_id[0].intent_template_id != -1, "a known task keeps its identity in an error result"


def test_selected_task_ids_and_missing_directories(run_dir: Path, dataset: Path) -> None:
    report = evaluate_directory(run_dir, load_tasks(dataset), _site_map(run_dir), task_ids=[492, 7])
    by_id = {r.task_id: r for r in report.results}
    assert by_id[492].status == EvalStatus.SUCCESS
    assert by_id[7].status == EvalStatus.ERROR  # not in the small dataset, no directory either
    assert not (run_dir / SUMMARY_FILE).exists(), "partial batches write no batch summary, like the reference"
    assert not (run_dir / "0" / RESULT_FILE).exists()


def test_wrong_answer_fails_without_error(run_dir: Path, dataset: Path) -> None:
    wrong = {"task_type": "retrieve", "status": "SUCCESS", "retrieved_data": ["Some Other Product"]}
    write_group(run_dir, [RunCase(0, "wrong", wrong, _golden_cases(dataset)[0].entries)])
    (report_result,) = evaluate_directory(run_dir, load_tasks(dataset), _site_map(run_dir)).results
    assert report_result.status == EvalStatus.FAILURE and report_result.error_msg is None


def test_run_config_is_used_without_a_global_site_map(run_dir: Path, dataset: Path) -> None:
    # No site map at all: each run's run_config.json says where the sites were.
    for task_id in TASK_IDS:
        (run_dir / str(task_id) / "run_config.json").write_text(json.dumps(g.site_config()))
    report = evaluate_directory(run_dir, load_tasks(dataset), SiteMap(), use_run_configs=True)
    assert all(r.status == EvalStatus.SUCCESS for r in report.results), [r.to_dict() for r in report.results]


def test_discovery_ignores_non_task_entries(tmp_path: Path) -> None:
    for name in ("12", "notes", "13"):
        (tmp_path / name).mkdir()
    (tmp_path / "12" / "agent_response.json").write_text("{}")
    (tmp_path / "12" / "network.har").write_text("{}")
    (tmp_path / "5").write_text("a file, not a run")
    assert discover_runs(tmp_path) == ([12], [13])


def test_summary_counts_by_site_key(run_dir: Path, dataset: Path) -> None:
    report = evaluate_directory(run_dir, load_tasks(dataset), _site_map(run_dir))
    summary = summarize(report.results)
    assert summary.overall.total == 4 and summary.overall.failed_or_error_count == 0
    assert summary.per_site["map-wikipedia"].success_task_ids == (267,)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "webarena_live.commands.cli", "evaluate", *args]
    return subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=120)


def test_cli_evaluates_and_prints_a_per_site_summary(run_dir: Path, dataset: Path) -> None:
    (run_dir / "0" / "network.har").write_text("not json at all")
    done = _cli(
        "--output-dir", str(run_dir), "--tasks", str(dataset), "--config", str(run_dir.parent / "config.json")
    )
    assert done.returncode == 0, done.stderr
    assert "gitlab" in done.stdout and "map-wikipedia" in done.stdout and "overall" in done.stdout
    assert "task 0:" in done.stdout and "network.har" in done.stdout
    statuses = {t: json.loads((run_dir / str(t) / RESULT_FILE).read_text())["status"] for t in TASK_IDS}
    assert statuses == {0: "error", 44: "success", 267: "success", 492: "success"}


def test_cli_task_ids_and_unusable_inputs(run_dir: Path, dataset: Path) -> None:
    config = str(run_dir.parent / "config.json")
    done = _cli("--output-dir", str(run_dir), "--tasks", str(dataset), "--config", config, "--task-ids", "44")
    assert done.returncode == 0, done.stderr
    assert (run_dir / "44" / RESULT_FILE).exists() and not (run_dir / "0" / RESULT_FILE).exists()
    missing = _cli("--output-dir", str(run_dir / "nope"), "--tasks", str(dataset))
    assert missing.returncode == 2 and "does not exist" in missing.stderr
    bad_tasks = _cli("--output-dir", str(run_dir), "--tasks", str(run_dir / "0" / "agent_response.json"))
    assert bad_tasks.returncode == 2 and "agent_response.json" in bad_tasks.stderr


def test_code_fenced_text_response_is_judged(run_dir: Path, dataset: Path) -> None:
    task = next(t for t in json.loads(dataset.read_text()) if t["task_id"] == 0)
    fenced = RawText("```json\n" + json.dumps(g.golden_response(task)) + "\n```")
    write_group(run_dir, [RunCase(0, "fenced", fenced, _golden_cases(dataset)[0].entries)])
    (result,) = evaluate_directory(run_dir, load_tasks(dataset), _site_map(run_dir)).results
    assert result.status == EvalStatus.SUCCESS


def test_cli_reads_the_official_dataset_from_its_package(run_dir: Path, oracle_python: Path) -> None:
    # The reference package is made importable for the CLI process only (never for this one); the
    # dataset is located inside it without importing it.
    site_packages = subprocess.run(
        [str(oracle_python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    command = [sys.executable, "-c", "import sys; sys.path.append(sys.argv.pop(1)); from "
               "webarena_live.commands.cli import main; sys.exit(main(sys.argv[1:]))", site_packages,
               "evaluate", "--output-dir", str(run_dir), "--tasks", "webarena-verified",
               "--config", str(run_dir.parent / "config.json")]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    statuses = {t: json.loads((run_dir / str(t) / RESULT_FILE).read_text())["status"] for t in TASK_IDS}
    assert set(statuses.values()) == {"success"}
    without = _cli("--output-dir", str(run_dir), "--tasks", "webarena-verified")
    assert without.returncode == 2 and "webarena-live[official]" in without.stderr


def _verdict_files(run_dir: Path) -> dict[Path, bytes]:
    return {path: path.read_bytes() for path in sorted(run_dir.rglob(RESULT_FILE))}


def test_cli_takes_the_dataset_from_the_config_and_lists_failures(run_dir: Path, dataset: Path) -> None:
    config = run_dir.parent / "config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "test_data_file": str(dataset)}))
    (run_dir / "44" / "agent_response.json").write_text(
        json.dumps({"task_type": "RETRIEVE", "status": "UNKNOWN_ERROR", "retrieved_data": ["x"]})
    )
    done = _cli("--output-dir", str(run_dir), "--config", str(config))
    assert done.returncode == 0, done.stderr
    assert f"dataset: {dataset}" in done.stdout.replace("\n", "")
    assert "failed (1): 44" in done.stdout


def test_cli_without_a_dataset_or_with_a_missing_one_writes_nothing(run_dir: Path) -> None:
    before = _verdict_files(run_dir)
    done = _cli("--output-dir", str(run_dir), "--config", str(run_dir.parent / "config.json"))
    assert done.returncode == 2 and "which tasks?" in done.stderr and "nothing was written" in done.stderr
    config = run_dir.parent / "named.json"
    config.write_text(json.dumps({"test_data_file": "no-such.json", "environments": {}}))
    done = _cli("--output-dir", str(run_dir), "--config", str(config))
    assert done.returncode == 2 and "test_data_file no-such.json does not exist" in done.stderr
    assert _verdict_files(run_dir) == before


def test_cli_refuses_runs_of_tasks_the_dataset_lacks(run_dir: Path, dataset: Path) -> None:
    """Judging them would overwrite good verdicts with errors: nothing is written, exit 2, one line."""
    config = str(run_dir.parent / "config.json")
    assert _cli("--output-dir", str(run_dir), "--tasks", str(dataset), "--config", config).returncode == 0
    before = _verdict_files(run_dir)
    assert len(before) == len(TASK_IDS)
    demo = _cli("--output-dir", str(run_dir), "--tasks", str(REPO / "tasks" / "demo.json"))
    assert demo.returncode == 2
    assert "task(s) 0, 44, 267, 492 not in the dataset" in demo.stderr and "demo.json" in demo.stderr
    absent = _cli(
        "--output-dir", str(run_dir), "--tasks", str(dataset), "--config", config, "--task-ids", "9999"
    )
    assert absent.returncode == 2 and f"no run folder {run_dir / '9999'}" in absent.stderr
    assert "not in the dataset" not in absent.stderr
    assert _verdict_files(run_dir) == before


def test_cli_evaluates_named_runs_beside_task_folders(run_dir: Path, dataset: Path) -> None:
    """`OUT/<task_id>/` and `OUT/<run>/<task_id>/` (sessions started with a run name) in one call."""
    shutil.copytree(run_dir / "44", run_dir / "attempt-2" / "44")
    shutil.copytree(run_dir / "267", run_dir / "attempt-2" / "267")
    config = str(run_dir.parent / "config.json")
    done = _cli("--output-dir", str(run_dir), "--tasks", str(dataset), "--config", config)
    assert done.returncode == 0, done.stderr
    assert len(_verdict_files(run_dir)) == len(TASK_IDS) + 2
    assert (run_dir / "attempt-2" / SUMMARY_FILE).is_file() and (run_dir / SUMMARY_FILE).is_file()
    only = _cli("--output-dir", str(run_dir / "attempt-2"), "--tasks", str(dataset), "--config", config)
    assert only.returncode == 0 and "2 " in only.stdout
