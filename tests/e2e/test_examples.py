"""The examples run as a user runs them: subprocesses against a real `webarena-live serve` of the demo
tasks with the demo shop mapped (docs/guides/agent-loops.md). Every episode's files are kept: the
mean reward a rollout prints is the one `webarena-live report` reads from its run directory."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.paths import EXAMPLES
from tests.support.serve_process import shop, start_serve
from webarena_live.launch import free_ports, serve_command

__all__ = ["shop"]

MEAN = re.compile(r"^(\d+) episodes, mean reward (\d\.\d{3}): \[(.*)\]$", re.MULTILINE)


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory, shop: str) -> Iterator[tuple[str, str, str, Path]]:
    workdir = tmp_path_factory.mktemp("examples")
    (session_port,) = free_ports(1)
    # start_serve picks its own session port; a repeated option's last value wins, so it is known here.
    process, control, proxy = start_serve(
        workdir,
        shop,
        workdir / "state",
        "--session-port",
        str(session_port),
        "--output-dir",
        str(workdir / "out"),
    )
    yield control, proxy.rsplit(":", 1)[1], str(session_port), workdir / "out"
    process.stop()


def reported(run: Path) -> dict[str, Any]:
    """`webarena-live report RUN --json --tasks demo`, as a user asks it after a rollout."""
    done = subprocess.run([*serve_command()[:-1], "report", str(run), "--json", "--tasks", "demo"],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    document: dict[str, Any] = json.loads(done.stdout)
    return document


def run_example(name: str, *args: str, timeout: float = 120) -> str:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args], capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"{name} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def rewards_of(output: str, episodes: int) -> list[float]:
    match = MEAN.search(output)
    assert match, f"no mean reward printed:\n{output}"
    rewards = [float(r) for r in match[3].split(", ")]
    assert int(match[1]) == len(rewards) == episodes
    assert set(rewards) <= {0.0, 1.0}  # the official verdict: 0 or 1, never partial credit
    assert float(match[2]) == pytest.approx(sum(rewards) / episodes, abs=1e-3)  # printed to 3 places
    return rewards


def test_rollout_32_http_sessions(serve: tuple[str, str, str, Path]) -> None:
    control, _, _, out = serve
    output = run_example("rollout.py", "--control", control, "--sessions", "32", "--run", "http")
    rewards = rewards_of(output, 32)
    assert 0 < sum(rewards) < 32  # the toy policy picks the cheapest mug's page about a third of the time
    figures = reported(out / "http")  # every episode an attempt of task 1003, none overwritten
    assert (figures["tasks"], figures["attempts"], figures["success"]) == (1, 32, sum(rewards))
    assert figures["rate"] == pytest.approx(sum(rewards) / 32)
    assert figures["per_task"]["mean"] == pytest.approx(sum(rewards) / 32)


def test_rollout_with_real_chromium_sessions(serve: tuple[str, str, str, Path]) -> None:
    control, _, _, out = serve
    output = run_example(
        "rollout.py", "--control", control, "--sessions", "8", "--browsers", "4", "--run", "mixed"
    )
    rewards = rewards_of(output, 8)
    figures = reported(out / "mixed")
    assert (figures["attempts"], figures["success"]) == (8, sum(rewards))


def test_a_failed_episode_is_told_and_the_others_go_on() -> None:
    """Episodes that cannot reach the control API fail one by one: each is named, no traceback, exit 1."""
    bad = subprocess.run(
        [sys.executable, str(EXAMPLES / "rollout.py"), "--control", "http://127.0.0.1:9", "--sessions", "3"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert bad.returncode == 1 and "Traceback" not in bad.stderr, bad.stderr
    assert bad.stderr.count("failed: ConnectError") == 3 and "no episode finished" in bad.stderr


def test_agent_loop_succeeds_and_shows_progress(serve: tuple[str, str, str, Path]) -> None:
    control, _, session_port, _ = serve
    output = run_example("agent_loop.py", "--control", control, "--session-port", session_port)
    seen = re.findall(r"(\d+)/(\d+) expected requests seen", output)
    assert seen[0] == ("0", "1") and seen[-1] == ("1", "1"), output
    assert "preview: success (score 1)" in output
    assert "verdict: success (score 1)" in output
