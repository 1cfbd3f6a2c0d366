"""The run directory's files (`evaluator/run_dir.py`): layout, atomic writes, earlier attempts kept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from webarena_live.evaluator.errors import OutputDirError
from webarena_live.evaluator.run_dir import (
    ATTEMPT_FILE,
    ATTEMPTS_DIR,
    RESPONSE_FILE,
    RESULT_FILE,
    TRACE_FILE,
    agent_response_text,
    discover_runs,
    keep_earlier_attempt,
    locate_attempt,
    named_runs,
    new_attempt,
    prepare_output_dir,
    run_name_problem,
    task_dir,
    write_json_atomically,
)


def _attempt(directory: Path, marker: str) -> None:
    directory.mkdir(parents=True)
    for name in (RESPONSE_FILE, TRACE_FILE, RESULT_FILE):
        (directory / name).write_text(marker)


def test_task_folders_with_and_without_a_run(tmp_path: Path) -> None:
    assert task_dir(tmp_path, 3) == tmp_path / "3"
    assert task_dir(tmp_path, 3, "attempt-2") == tmp_path / "attempt-2" / "3"


@pytest.mark.parametrize("name", ["a", "run-1", "2026-11-23_gpt.5", "A" * 100])
def test_good_run_names(name: str) -> None:
    assert run_name_problem(name) is None


@pytest.mark.parametrize("name", ["", "3", ".journal", "../x", "a/b", "-a", "A" * 101, "a b"])
def test_run_names_that_could_escape_or_collide_are_refused(name: str) -> None:
    problem = run_name_problem(name)
    assert problem and repr(name) in problem


def test_earlier_attempts_are_moved_aside_and_numbered(tmp_path: Path) -> None:
    assert keep_earlier_attempt(tmp_path / "3") is None  # nothing there yet
    _attempt(tmp_path / "3", "first")
    first = keep_earlier_attempt(tmp_path / "3")
    assert first == tmp_path / ATTEMPTS_DIR / "3" / "1" and not (tmp_path / "3").exists()
    _attempt(tmp_path / "3", "second")
    second = keep_earlier_attempt(tmp_path / "3")
    assert second == tmp_path / ATTEMPTS_DIR / "3" / "2"
    assert (first / RESULT_FILE).read_text() == "first" and (second / RESULT_FILE).read_text() == "second"
    assert discover_runs(tmp_path) == ([], [])  # the reference's tooling skips the dot folder


def test_an_attempt_is_found_by_its_id_wherever_later_attempts_moved_it(tmp_path: Path) -> None:
    folder = tmp_path / "run-a" / "3"
    for attempt in ("one", "two", "three"):
        with new_attempt(folder) as target:
            write_json_atomically(target.path(ATTEMPT_FILE), {"attempt": attempt})
            write_json_atomically(target.path(RESULT_FILE), {"status": "success", "of": attempt})
    assert locate_attempt(folder, "three") == folder
    assert locate_attempt(folder, "two") == tmp_path / "run-a" / ATTEMPTS_DIR / "3" / "2"
    assert locate_attempt(folder, "one") == tmp_path / "run-a" / ATTEMPTS_DIR / "3" / "1"
    assert locate_attempt(folder, "four") is None
    assert json.loads((locate_attempt(folder, "one") / RESULT_FILE).read_text())["of"] == "one"


def test_writes_are_atomic_and_shared_readable(tmp_path: Path) -> None:
    path = tmp_path / RESULT_FILE
    write_json_atomically(path, {"status": "success", "actual": "caf\udce9"})
    assert path.stat().st_mode & 0o777 == 0o644
    assert json.loads(path.read_text()) == {"status": "success", "actual": "caf\udce9"}
    assert [p.name for p in tmp_path.iterdir()] == [RESULT_FILE]


def test_agent_response_is_written_with_official_names() -> None:
    text = agent_response_text({"action": "retrieve", "status": "success", "results": [1]})
    assert json.loads(text) == {
        "task_type": "RETRIEVE",
        "status": "SUCCESS",
        "retrieved_data": [1],
    }
    assert agent_response_text("not json") == "not json"


def test_named_runs_hold_task_folders(tmp_path: Path) -> None:
    _attempt(tmp_path / "run-a" / "3", "x")
    _attempt(tmp_path / "7", "x")
    (tmp_path / "empty-run").mkdir()
    (tmp_path / ".journal").mkdir()
    assert named_runs(tmp_path) == [tmp_path / "run-a"]


def test_output_dir_is_created_or_refused_in_one_line(tmp_path: Path) -> None:
    assert prepare_output_dir(tmp_path / "new" / "out") == (tmp_path / "new" / "out").resolve()
    (tmp_path / "afile").write_text("x")
    with pytest.raises(OutputDirError, match=r"afile is not a directory$"):
        prepare_output_dir(tmp_path / "afile")
    with pytest.raises(OutputDirError, match="cannot be used"):
        prepare_output_dir(tmp_path / "afile" / "below")


_WRITER = """
import sys, time
from pathlib import Path
from webarena_live.evaluator import new_attempt, task_dir, write_json_atomically, write_text_atomically
out, who = Path(sys.argv[1]), sys.argv[2]
time.sleep(max(0.0, float(sys.argv[3]) - time.time()))  # both start writing at once
for i in range(100):
    with new_attempt(task_dir(out, 1003)) as target:
        write_json_atomically(target.path("attempt.json"), {"attempt": f"{who}-{i}"})
        write_json_atomically(target.path("agent_response.json"), {"who": who, "i": i})
        write_text_atomically(target.path("network.har"), '{"log": {"entries": []}}')
        write_json_atomically(target.path("eval_result.json"), {"status": "success", "who": who, "i": i})
"""


def test_two_processes_finishing_the_same_task_keep_every_attempt(tmp_path: Path) -> None:
    """The workers of `serve --workers` write one output directory: finishes of the same task in two
    processes take turns, so no write fails on a folder moved away under it and no attempt is lost."""
    import subprocess
    import sys
    import time

    at = str(time.time() + 3)
    command = [sys.executable, "-c", _WRITER, str(tmp_path)]
    writers = [subprocess.Popen([*command, who, at], stderr=subprocess.PIPE, text=True) for who in ("a", "b")]
    for writer in writers:
        _, errors = writer.communicate(timeout=120)
        assert writer.returncode == 0, errors
    folders = [tmp_path / "1003", *(tmp_path / ".attempts" / "1003").iterdir()]
    assert len(folders) == 200
    seen = set()
    for folder in folders:
        assert sorted(p.name for p in folder.iterdir()) == [
            "agent_response.json",
            "attempt.json",
            "eval_result.json",
            "network.har",
        ]
        result = json.loads((folder / "eval_result.json").read_text())
        assert (
            json.loads((folder / "attempt.json").read_text())["attempt"] == f"{result['who']}-{result['i']}"
        )
        response = json.loads((folder / "agent_response.json").read_text())
        assert (response["who"], response["i"]) == (result["who"], result["i"])  # a whole attempt each
        seen.add((result["who"], result["i"]))
    assert len(seen) == 200


_PLACER = """
import json, sys, time
from pathlib import Path
from webarena_live.evaluator import ATTEMPT_FILES, locate_attempt, place_run, task_dir
out, who = Path(sys.argv[1]), sys.argv[2]
time.sleep(max(0.0, float(sys.argv[3]) - time.time()))  # both start writing at once
wrong = []
for i in range(150):
    attempt = f"{who}-{i}"
    contents = {name: json.dumps({"attempt": attempt}).encode() for name in ATTEMPT_FILES}
    written = place_run(task_dir(out, 1003), contents)
    if sorted(name for name in written if name in ATTEMPT_FILES) != sorted(ATTEMPT_FILES):
        wrong.append((attempt, sorted(written)))
    elif locate_attempt(Path(written["attempt.json"]).parent, attempt) is None:
        wrong.append((attempt, "not found where it was written"))
print(json.dumps(wrong))
"""


def test_each_finish_is_told_all_its_files_while_another_process_finishes_the_same_task(
    tmp_path: Path,
) -> None:
    """What a finish answers with, its files' paths, is listed while it still holds the task folder:
    listed after, the other worker's finish could move the folder aside first, and the answer lacked
    `eval_result.json` (a 500 `KeyError` on the worker, whose retried finish wrote a second attempt)."""
    import subprocess
    import sys
    import time

    at = str(time.time() + 3)
    command = [sys.executable, "-c", _PLACER, str(tmp_path)]
    placers = [subprocess.Popen([*command, who, at], stdout=subprocess.PIPE, text=True) for who in "ab"]
    for placer in placers:
        told, _ = placer.communicate(timeout=120)
        assert placer.returncode == 0
        assert json.loads(told) == []
    folders = [tmp_path / "1003", *(tmp_path / ".attempts" / "1003").iterdir()]
    assert len({json.loads((folder / ATTEMPT_FILE).read_text())["attempt"] for folder in folders}) == 300
