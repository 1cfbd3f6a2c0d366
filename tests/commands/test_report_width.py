"""`webarena-live report` uses the terminal's width: $COLUMNS, else the terminal its streams or its
process are attached to (`/dev/tty`, when a tool sends every stream to a pipe or a file); without any
terminal, 160 columns, room for every table whole. A wide terminal gets whole column headings and each
intent template on one line, not wrapped word by word.

Real `webarena-live report` processes on a run of 120 official tasks, one with a pseudo-terminal of 150
columns as its controlling terminal and no stream on it.
"""

from __future__ import annotations

import fcntl
import os
import pty
import random
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from tests.commands.test_report import _write_run
from webarena_live.evaluator import load_tasks

pytestmark = pytest.mark.timeout(120)
CLI = str(Path(sys.executable).parent / "webarena-live")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, official_dataset: Path) -> list[str]:
    """The report command of a run with long intent templates (the official ones)."""
    tasks = load_tasks(official_dataset)
    rng = random.Random(1)
    plan = {task_id: rng.choice(["success", "failure", "error"]) for task_id in sorted(tasks)[:120]}
    folder = tmp_path_factory.mktemp("wide") / "run"
    _write_run(folder, plan, tasks)
    return [CLI, "report", str(folder), "--tasks", str(official_dataset)]


def _report(command: list[str], env: dict[str, str], **options: object) -> list[str]:
    done = subprocess.run(  # type: ignore[call-overload]
        command, env=env, capture_output=True, stdin=subprocess.DEVNULL, text=True, timeout=60, **options
    )
    assert done.returncode == 0, done.stderr
    return str(done.stdout).splitlines()


def _without_columns() -> dict[str, str]:
    return {key: value for key, value in os.environ.items() if key not in ("COLUMNS", "LINES")}


def _one_line_templates(lines: list[str]) -> None:
    heading = next(line for line in lines if "rate [95% interval]" in line)
    assert heading.rstrip().endswith("environment"), heading  # the heading whole, not `environmen`
    start = next(i for i, line in enumerate(lines) if line.startswith("By intent template"))
    rule = next(i for i in range(start, len(lines)) if lines[i].strip().startswith("─"))
    rows = []
    for line in lines[rule + 1 :]:
        if not line.strip():
            break
        rows.append(line)
    # Each template with its figures on one line: no line of a template's words alone.
    assert len(rows) == 10 and all("%" in row for row in rows), rows


def test_columns_widens_the_report(run: list[str]) -> None:
    lines = _report(run, {**_without_columns(), "COLUMNS": "160"})
    assert 80 < max(map(len, lines)) <= 160
    _one_line_templates(lines)


def test_the_controlling_terminal_widens_a_report_whose_streams_are_pipes(run: list[str]) -> None:
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 150, 0, 0))
    name = os.ttyname(follower)

    def attach() -> None:  # a session of its own whose controlling terminal is the pseudo-terminal
        os.close(os.open(name, os.O_RDWR))

    try:
        lines = _report(run, _without_columns(), start_new_session=True, preexec_fn=attach)
    finally:
        os.close(follower)
        os.close(leader)
    assert 80 < max(map(len, lines)) <= 150
    _one_line_templates(lines)


def test_without_any_terminal_the_tables_are_whole(run: list[str]) -> None:
    """A file or a tool's output: no terminal to fit, so nothing is cut (80 columns cut `environment`)."""
    lines = _report(run, _without_columns(), start_new_session=True)
    assert 80 < max(map(len, lines)) <= 160
    _one_line_templates(lines)
