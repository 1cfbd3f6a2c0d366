"""The examples run as a user runs them: subprocesses against a real `webarena-live serve` of the demo
tasks with the demo shop mapped (README, "Agent and RL loops")."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.support.paths import EXAMPLES
from tests.support.serve_process import shop, start_serve
from webarena_live.launch import free_ports

__all__ = ["shop"]

MEAN = re.compile(r"^(\d+) episodes, mean reward (\d\.\d{3}): \[(.*)\]$", re.MULTILINE)


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory, shop: str) -> Iterator[tuple[str, str, str]]:
    workdir = tmp_path_factory.mktemp("examples")
    (session_port,) = free_ports(1)
    # start_serve picks its own session port; a repeated option's last value wins, so it is known here.
    process, control, proxy = start_serve(
        workdir, shop, workdir / "state", "--session-port", str(session_port)
    )
    yield control, proxy.rsplit(":", 1)[1], str(session_port)
    process.stop()


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


def test_rollout_32_http_sessions(serve: tuple[str, str, str]) -> None:
    control, _, _ = serve
    output = run_example("rollout.py", "--control", control, "--sessions", "32")
    rewards = rewards_of(output, 32)
    assert 0 < sum(rewards) < 32  # the toy policy picks the cheapest mug's page about a third of the time


def test_rollout_with_real_chromium_sessions(serve: tuple[str, str, str]) -> None:
    control, _, _ = serve
    output = run_example("rollout.py", "--control", control, "--sessions", "8", "--browsers", "4")
    rewards_of(output, 8)


def test_a_failed_episode_is_told_and_the_others_go_on() -> None:
    """Episodes that cannot reach the control API fail one by one: each is named, no traceback, exit 1."""
    bad = subprocess.run(
        [sys.executable, str(EXAMPLES / "rollout.py"), "--control", "http://127.0.0.1:9", "--sessions", "3"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert bad.returncode == 1 and "Traceback" not in bad.stderr, bad.stderr
    assert bad.stderr.count("failed: ConnectError") == 3 and "no episode finished" in bad.stderr


def test_agent_loop_succeeds_and_shows_progress(serve: tuple[str, str, str]) -> None:
    control, _, session_port = serve
    output = run_example("agent_loop.py", "--control", control, "--session-port", session_port)
    seen = re.findall(r"(\d+)/(\d+) expected requests seen", output)
    assert seen[0] == ("0", "1") and seen[-1] == ("1", "1"), output
    assert "preview: success (score 1)" in output
    assert "verdict: success (score 1)" in output
