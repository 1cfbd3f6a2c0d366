"""verifiers for real: `WebArenaRubric` scores rollouts (one, and a group) by finishing the sessions
their states name, against a real `serve`; a masked reward marks the rollout with verifiers' own
infrastructure error (`vf.InfraError`) and the `webarena_masked` metric, so it is never a silent 0.0.

Runs in a venv with `webarena-live[verifiers]` (scripts/bootstrap.sh makes `.venv-verifiers`).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import verifiers as vf
from verifiers.types import State

from tests.support.rewards import PLANS, run_http_agent
from tests.support.serve_process import Served
from webarena_live.rewards.verifiers_rubric import WebArenaRubric

pytestmark = pytest.mark.timeout(300)


def rollout(index: int, session: str, reply: str, *, in_state: bool = False) -> State:
    """A finished rollout's state as a verifiers environment leaves it: its input row and completion."""
    info = {} if in_state else {"webarena_session": session}
    state = State(
        input={
            "prompt": [{"role": "user", "content": "the task's intent"}],
            "example_id": index,
            "answer": "",
            "info": info,
        }
    )
    state["completion"] = [{"role": "assistant", "content": reply}]
    state["trajectory"] = []
    if in_state:
        state["webarena_session"] = session
    return state


def reply_for(answer: Any) -> str:
    return answer if isinstance(answer, str) else f"I am done.\n```json\n{json.dumps(answer)}\n```"


def test_a_group_of_rollouts_gets_the_verdicts(served: tuple[Served, Path], shop: str) -> None:
    control = served[0].control
    rubric = WebArenaRubric(control=control)
    states = []
    for index, (label, plan) in enumerate(PLANS.items()):
        run_http_agent(control, shop, f"vf-{label}", plan)
        states.append(rollout(index, f"vf-{label}", reply_for(plan.answer), in_state=index % 2 == 1))
    asyncio.run(rubric.score_group(states))
    for state, (label, plan) in zip(states, PLANS.items(), strict=True):
        assert state["reward"] == plan.score, (label, state.get("metrics"))
        assert state["metrics"] == {"webarena_reward": plan.score, "webarena_masked": 0.0}
        assert state.get("error") is None and state["webarena_reward"]["status"] in ("success", "failure")


def test_one_rollout_and_a_masked_one(served: tuple[Served, Path], shop: str) -> None:
    control = served[0].control
    rubric = WebArenaRubric(control=control)
    plan = PLANS["retrieve-right"]
    run_http_agent(control, shop, "vf-one", plan)
    state = rollout(0, "vf-one", reply_for(plan.answer))
    asyncio.run(rubric.score_rollout(state))
    assert state["reward"] == 1.0

    lost = rollout(1, "vf-nobody", reply_for(plan.answer))
    asyncio.run(rubric.score_rollout(lost))
    assert isinstance(lost["error"], vf.InfraError) and "unknown_session" in str(lost["error"])
    assert lost["metrics"]["webarena_masked"] == 1.0 and lost["webarena_reward"]["masked"] is True
