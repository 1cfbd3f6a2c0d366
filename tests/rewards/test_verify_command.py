"""`webarena-live verify` and `webarena-live export harbor`, run as commands against a real `serve`.

`verify` writes the reward files Harbor reads, equal to the verdict; a session that cannot be judged
exits non-zero with the reason and leaves no reward file (a stale one is removed). `export harbor`
writes a task folder per task (Harbor's own loader checks them in tests/rewards/test_harbor.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.support.rewards import PLANS, run_http_agent
from tests.support.serve_process import Served, start_session

pytestmark = pytest.mark.timeout(300)


def webarena_live(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "webarena_live.commands.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def test_verify_writes_the_verdict_as_harbors_reward_files(
    served: tuple[Served, Path], shop: str, tmp_path: Path
) -> None:
    control = served[0].control
    for label in ("navigate-right", "retrieve-wrong", "not-json"):
        plan = PLANS[label]
        run_http_agent(control, shop, f"verify-{label}", plan)
        answer = tmp_path / f"{label}.json"
        answer.write_text(plan.answer if isinstance(plan.answer, str) else json.dumps(plan.answer))
        out = tmp_path / label
        done = webarena_live(
            "verify",
            "--session",
            f"verify-{label}",
            "--answer",
            str(answer),
            "--control",
            control,
            "--out",
            str(out),
        )
        assert done.returncode == 0, done.stderr
        result = json.loads((out / "eval_result.json").read_text())
        numbers = json.loads((out / "reward.json").read_text())
        assert float((out / "reward.txt").read_text()) == plan.score == result["score"] == numbers["reward"]
        assert numbers["success"] == (1.0 if plan.score else 0.0)
        assert all(isinstance(value, float) for value in numbers.values())  # Harbor: name -> number
        names = [e["evaluator_name"] for e in result["evaluators_results"]]
        assert [k for k in numbers if k not in ("reward", "success")] == [
            name if names[:i].count(name) == 0 else f"{name}_{names[:i].count(name) + 1}"
            for i, name in enumerate(names)
        ]
    # again without an answer: the finished session's verdict is read; without --out, on a host (no
    # Harbor verifier folder), the files go where it is run
    assert not Path("/logs/verifier").exists()
    again = tmp_path / "again"
    again.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "webarena_live.commands.cli", "verify", "--session", "verify-navigate-right",
         "--control", control],
        capture_output=True, text=True, timeout=120, cwd=again,
    )  # fmt: skip
    assert done.returncode == 0 and float((again / "reward.txt").read_text()) == 1.0, done.stderr
    assert str(again) in done.stdout


def test_verify_without_a_judgeable_session_writes_no_reward(
    served: tuple[Served, Path], tmp_path: Path
) -> None:
    control = served[0].control
    out = tmp_path / "verifier"
    out.mkdir()
    (out / "reward.txt").write_text("1\n")  # an earlier trial's, which must not count for this one
    answer = tmp_path / "answer.json"
    answer.write_text(json.dumps(PLANS["navigate-right"].answer))
    done = webarena_live(
        "verify",
        "--session",
        "never-started",
        "--answer",
        str(answer),
        "--control",
        control,
        "--out",
        str(out),
    )
    assert done.returncode == 1 and not list(out.iterdir())
    assert done.stderr.strip().count("\n") == 0 and "unknown_session" in done.stderr, done.stderr
    start_session(control, "verify-running", 1003)
    done = webarena_live("verify", "--session", "verify-running", "--control", control, "--out", str(out))
    assert done.returncode == 1 and "not_finished" in done.stderr and not list(out.iterdir())


def test_export_harbor_writes_a_task_folder_per_task(tmp_path: Path) -> None:
    done = webarena_live("export", "harbor", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    folders = sorted(p.name for p in tmp_path.iterdir() if p.is_dir())
    assert folders == [f"webarena-live-{i}" for i in range(1001, 1008)]
    folder = tmp_path / "webarena-live-1004"
    config = tomllib.loads((folder / "task.toml").read_text())
    assert (
        config["task"]["name"] == "webarena-live/task-1004" and config["metadata"]["webarena_task_id"] == 1004
    )
    assert "Trailblazer Hiking Backpack" in (folder / "instruction.md").read_text()
    assert "webarena-live verify" in (folder / "tests" / "test.sh").read_text()
    assert (folder / "tests" / "test.sh").stat().st_mode & 0o111

    # The product's wheel beside the tasks and in each build context; the environment installs that file.
    wheel = tmp_path / "webarena_live-0.1.0-py3-none-any.whl"
    assert (folder / "environment" / wheel.name).read_bytes() == wheel.read_bytes()
    dockerfile = (folder / "environment" / "Dockerfile").read_text()
    assert f"COPY {wheel.name} /opt/webarena-live/{wheel.name}" in dockerfile
    assert f"pip install --no-cache-dir /opt/webarena-live/{wheel.name}" in dockerfile

    few = webarena_live("export", "harbor", "--out", str(tmp_path / "few"), "--task-ids", "1001,1003")
    assert few.returncode == 0 and len([p for p in (tmp_path / "few").iterdir() if p.is_dir()]) == 2
    wrong = webarena_live("export", "harbor", "--out", str(tmp_path / "wrong"), "--task-ids", "42")
    assert wrong.returncode == 2 and "42" in wrong.stderr and not (tmp_path / "wrong").exists()


def test_the_exported_wheel_installs_with_pip_and_runs_the_product(tmp_path: Path) -> None:
    """pip installs the wheel `export harbor` writes (its RECORD checked), and what it installed is the
    product: the CLI runs from there and exports again; `--requirement` names a pip requirement instead."""
    assert (
        webarena_live("export", "harbor", "--out", str(tmp_path / "tasks"), "--task-ids", "1003").returncode
        == 0
    )
    wheel = tmp_path / "tasks" / "webarena_live-0.1.0-py3-none-any.whl"
    target = tmp_path / "installed"
    pip = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--no-deps",
        "--no-index",
        "--target",
        str(target),
        str(wheel),
    ]
    installed = subprocess.run(pip, capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr
    env = {**os.environ, "PYTHONPATH": str(target)}  # the wheel's files first; its dependencies from here
    probe = "import webarena_live, webarena_live.evaluator as e; print(webarena_live.__file__, e.__file__)"
    found = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert all(path.startswith(str(target)) for path in found.stdout.split()), found.stdout + found.stderr
    again = webarena_live("export", "harbor", "--out", str(tmp_path / "again"), "--task-ids", "1003", env=env)
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "again" / wheel.name).is_file()

    named = webarena_live(
        "export", "harbor", "--out", str(tmp_path / "named"), "--task-ids", "1003",
        "--requirement", "webarena-live @ https://example.invalid/webarena_live-0.1.0-py3-none-any.whl",
    )  # fmt: skip
    assert named.returncode == 0, named.stderr
    dockerfile = (tmp_path / "named" / "webarena-live-1003" / "environment" / "Dockerfile").read_text()
    assert "pip install --no-cache-dir 'webarena-live @ https://example.invalid/" in dockerfile
    assert not list((tmp_path / "named").rglob("*.whl"))
