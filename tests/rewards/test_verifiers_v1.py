"""verifiers' `verifiers.v1` for real (0.3.1 and 0.4.x, each in its own venv): the `webarena` reward of a
task, as a `@vf.reward` method (the `WebArenaRewards` mixin) and as a function named in
`TaskConfig.rewards`, called by verifiers' own `Task.score` on rollouts whose sessions a real `serve`
judged. A masked reward is verifiers' `TaskError` (the rollout's reward left unscored), never a 0.0.

Runs in a venv with `webarena-live[verifiers]` (scripts/bootstrap.sh: `.venv-verifiers` with the newest
verifiers, `.venv-verifiers03` with 0.3.1).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import verifiers
import verifiers.v1 as vf

from tests.support.rewards import PLANS, run_http_agent
from tests.support.serve_process import Served
from webarena_live.rewards.verifiers_v1 import WebArenaRewards

pytestmark = pytest.mark.timeout(300)
PLUGGED = "webarena_live.rewards.verifiers_v1:webarena_reward"


class ShopData(vf.TaskData):
    webarena_session: str | None = None


class ShopTask(WebArenaRewards, vf.Task[ShopData]):
    """A task whose rollouts browse the demo shop: the mixin gives it the `webarena` reward."""


class PlainTask(vf.Task[ShopData]):
    """A task with no reward of its own: the reward is plugged by its config."""


def rollout(task: vf.Task, *, session: str | None = None, answer: Any = None) -> vf.Trace:
    """A finished rollout's trace as verifiers builds one for `task` (its data, an agent, its info)."""
    trace = vf.Trace(
        task=vf.TraceTask(type=type(task).__name__, data=task.data, key=task.key, hash=task.hash),
        agent=vf.AgentInfo(config=vf.AgentConfig()),
    )
    if session is not None:
        trace.info["webarena_session"] = session
    if answer is not None:
        trace.info["webarena_answer"] = answer
    return trace


def test_the_installed_verifiers_is_the_one_this_venv_is_for() -> None:
    """0.4 has no legacy rubric, and importing it there says what to use; 0.3.1 has both APIs."""
    assert verifiers.__version__.startswith(("0.3.1", "0.4.")), verifiers.__version__
    assert hasattr(verifiers, "Rubric") is verifiers.__version__.startswith("0.3")
    done = subprocess.run(
        [sys.executable, "-c", "import webarena_live.rewards.verifiers_rubric"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    if verifiers.__version__.startswith("0.3"):
        assert done.returncode == 0, done.stderr
    else:
        last = done.stderr.strip().splitlines()[-1]
        assert last.startswith(
            "ImportError: webarena_live.rewards.verifiers_rubric needs the legacy vf.Rubric"
        )
        assert "webarena_live.rewards.verifiers_v1" in last and "verifiers>=0.3.1,<0.4" in last


def test_task_rewards_are_the_verdicts(served: tuple[Served, Path], shop: str, monkeypatch) -> None:
    control = served[0].control
    monkeypatch.setenv("WEBARENA_LIVE_CONTROL", control)
    for label, plan in PLANS.items():
        session = f"v1-{label}"
        run_http_agent(control, shop, session, plan)
        if label.startswith("navigate"):  # the session named by the row, the answer by the trace's info
            task: vf.Task = ShopTask(ShopData(prompt="browse", webarena_session=session))
            trace = rollout(task, answer=plan.answer)
        else:  # the session per rollout in the trace's info, the answer a plugged function reads
            config = vf.TaskConfig(rewards={"webarena": vf.RewardFunctionConfig(fn=PLUGGED)})
            task = PlainTask(ShopData(prompt="browse"), config)
            answer = plan.answer if isinstance(plan.answer, str) else json.dumps(plan.answer)
            trace = rollout(task, session=session, answer=answer)
        asyncio.run(task.score(trace))  # verifiers' own scoring: hooks found, invoked, recorded
        recorded = trace.rewards["webarena"]
        assert recorded is not None and recorded.score == plan.score, (label, trace.rewards)
        assert trace.reward == plan.score and not trace.errors, label
        assert trace.info["webarena_reward"]["masked"] is False, label


def test_a_masked_reward_is_a_task_error_never_zero(served: tuple[Served, Path], monkeypatch) -> None:
    monkeypatch.setenv("WEBARENA_LIVE_CONTROL", served[0].control)
    task = ShopTask(ShopData(prompt="browse"))
    trace = rollout(task, session="v1-nobody", answer=PLANS["navigate-right"].answer)
    with pytest.raises(vf.TaskError, match="unknown_session") as raised:
        asyncio.run(task.score(trace))
    assert trace.rewards["webarena"] is None  # seeded, never scored: no 0.0 to train on
    assert trace.info["webarena_reward"]["kind"] == "unknown_session"
    # ... and where verifiers' rollout puts it: the trace's error, the rollout failed
    trace.record_error(raised.value)
    assert trace.errors[-1].type == "TaskError" and not trace.ok

    unnamed = rollout(task, answer="{}")  # no session anywhere: an error of the rollout's setup, named
    with pytest.raises(vf.TaskError, match="names no session"):
        asyncio.run(task.score(unnamed))
