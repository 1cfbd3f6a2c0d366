import json
import subprocess
import sys
from pathlib import Path

import pytest

from webarena_live.commands.cli import build_parser

CLI = [sys.executable, "-m", "webarena_live.commands.cli"]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["serve", "--port", "abc"], "not a port number: 'abc'"),
        (["serve", "--port", "70000"], "port out of range"),
        (["evaluate"], "--output-dir"),
        (["evaluate", "--output-dir", "x", "--task-ids", "1,b"], "comma-separated integers"),
        (["bogus"], "invalid choice: 'bogus'"),
    ],
)
def test_wrong_arguments_give_one_clear_line_and_exit_2(args: list[str], needle: str) -> None:
    done = subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "--help" in lines[0]


def test_every_option_of_every_command_is_explained() -> None:
    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command")
    for name, sub in commands.choices.items():  # type: ignore[union-attr]
        for action in sub._actions:
            assert action.help, f"{name} {action.option_strings} has no help text"
        text = subprocess.run([*CLI, name, "--help"], capture_output=True, text=True, timeout=60).stdout
        for action in sub._actions:
            for option in action.option_strings:
                assert option in text


def test_demo_refuses_an_unusable_output_dir_in_one_line(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("keep me")
    for target, needle in ((afile, "is not a directory"), (Path("/proc/forbidden"), "cannot be used")):
        done = subprocess.run([*CLI, "demo", "--output-dir", str(target)], capture_output=True, text=True)
        assert done.returncode == 2, done.stderr
        lines = done.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"webarena-live demo: output directory {target}")
        assert needle in lines[0]
    assert afile.read_text() == "keep me"


def test_addon_path_names_the_entry_script_of_the_package() -> None:
    done = subprocess.run([*CLI, "addon-path"], capture_output=True, text=True, timeout=60)
    path = Path(done.stdout.strip())
    assert (
        done.returncode == 0
        and path.name == "entry.py"
        and path.parent.name in ("addon", "webarena_live")
        and path.is_file()
    )


def test_evaluate_without_tasks_judges_a_run_of_the_demo_tasks_against_them(tmp_path: Path) -> None:
    """`serve` loads the embedded demo tasks without `--tasks`, so `evaluate` of its outputs needs none
    either (the official dataset, not installed here, would come first when it holds the tasks)."""
    run = tmp_path / "out" / "1003"
    run.mkdir(parents=True)
    (run / "agent_response.json").write_text('{"task_type": "NAVIGATE", "status": "SUCCESS"}')
    (run / "network.har").write_text('{"log": {"entries": []}}')
    done = subprocess.run(
        [*CLI, "evaluate", "--output-dir", str(tmp_path / "out")], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "demo.json" in done.stdout.replace("\n", "")
    assert json.loads((run / "eval_result.json").read_text())["task_id"] == 1003
