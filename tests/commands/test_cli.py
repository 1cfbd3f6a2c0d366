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
