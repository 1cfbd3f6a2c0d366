"""Harbor for real (Python 3.12+, `harbor` installed): every folder `export harbor` writes is a task
Harbor's own loader accepts, and its scripts run for real: `environment/start_session.sh` starts the
session, an HTTP agent browses through the address it wrote, `<task>/tests/test.sh` writes reward files that
Harbor's own verifier parsers read as the verdict; a session that cannot be judged leaves none.

Runs in `.venv-harbor` (scripts/bootstrap.sh).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from harbor.lint.models import DEFAULT_RULES
from harbor.lint.task import lint_task
from harbor.models.task.task import Task
from harbor.models.trial.paths import TrialPaths
from harbor.verifier.verifier import Verifier

from tests.support.rewards import PLANS
from tests.support.serve_process import Served, browse

pytestmark = pytest.mark.timeout(300)


def export(out: Path) -> list[Path]:
    done = subprocess.run(
        [sys.executable, "-m", "webarena_live.commands.cli", "export", "harbor", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return sorted(p for p in out.iterdir() if p.is_dir())  # the task folders (the wheel beside them)


def harbor_rewards(verifier_dir: Path) -> dict[str, float]:
    """The rewards Harbor's verifier reads from a trial's verifier folder (reward.json first)."""
    paths = TrialPaths(verifier_dir.parent)
    verifier = Verifier.__new__(Verifier)  # only its file parsers: no container is involved
    verifier.trial_paths = paths
    rewards: dict[str, float] = verifier._parse_reward_json()
    assert verifier._parse_reward_text() == {"reward": rewards["reward"]}
    return rewards


def test_harbor_loads_every_exported_task(tmp_path: Path) -> None:
    folders = export(tmp_path)
    assert len(folders) == 7
    for folder in folders:
        assert Task.is_valid_dir(folder), folder
        task = Task(folder)
        assert task.name == f"webarena-live/task-{folder.name.split('-')[-1]}"
        assert task.config.environment.healthcheck is not None
        assert set(task.config.environment.env) == {
            "WEBARENA_LIVE_CONTROL",
            "WEBARENA_LIVE_CONTROL_TOKEN",
            "WEBARENA_LIVE_SESSION",
        }
        # the verifier shares the agent's container (it reads the agent's answer file there)
        assert [f.rule for f in lint_task(folder, selected_rules=DEFAULT_RULES)] == ["shared-verifier"]


def test_the_task_scripts_run_for_real(served: tuple[Served, Path], shop: str, tmp_path: Path) -> None:
    folder = next(f for f in export(tmp_path / "tasks") if f.name == "webarena-live-1003")
    env = {
        **os.environ,
        "WEBARENA_LIVE_CONTROL": served[0].control,
        "WEBARENA_LIVE_SESSION_FILE": str(tmp_path / "session.json"),
        "WEBARENA_LIVE_ANSWER": str(tmp_path / "agent" / "answer.json"),
        "WEBARENA_LIVE_VERIFIER_DIR": str(tmp_path / "trial" / "verifier"),
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    }
    env.pop("WEBARENA_LIVE_SESSION", None)  # as Harbor runs a trial: no session named

    def start(session_file: Path) -> dict:
        started = subprocess.run(
            ["bash", str(folder / "environment" / "start_session.sh")],
            env={**env, "WEBARENA_LIVE_SESSION_FILE": str(session_file)},
            timeout=60,
            capture_output=True,
            text=True,
        )
        assert started.returncode == 0, started.stderr
        return json.loads(session_file.read_text())

    # Each trial a session of its own (two trials of the task at once restart nothing of each other's);
    # the healthcheck run again in the same trial keeps its session.
    session = start(tmp_path / "session.json")
    other = start(tmp_path / "other-trial.json")
    assert session["session"].startswith("harbor-1003-") and session["task_id"] == 1003
    assert other["session"].startswith("harbor-1003-") and other["session"] != session["session"]
    assert other["proxy"] != session["proxy"]
    assert start(tmp_path / "session.json") == session

    for path in PLANS["navigate-right"].paths:  # the agent, through the address it was given
        browse(session["proxy"], shop, path)
    (tmp_path / "agent").mkdir()
    (tmp_path / "agent" / "answer.json").write_text(json.dumps(PLANS["navigate-right"].answer))
    verified = subprocess.run(
        ["bash", str(folder / "tests" / "test.sh")], env=env, timeout=120, capture_output=True, text=True
    )
    assert verified.returncode == 0, verified.stderr
    rewards = harbor_rewards(tmp_path / "trial" / "verifier")
    assert rewards["reward"] == 1.0 and rewards["success"] == 1.0 and rewards["NetworkEventEvaluator"] == 1.0

    # a session that cannot be judged: test.sh fails with the reason and no reward file is left
    failed = subprocess.run(
        ["bash", str(folder / "tests" / "test.sh")],
        timeout=120,
        capture_output=True,
        text=True,
        env={**env, "WEBARENA_LIVE_SESSION": "harbor-nobody"},
    )
    assert failed.returncode == 1 and "unknown_session" in failed.stderr
    assert not list((tmp_path / "trial" / "verifier").glob("reward.*"))
