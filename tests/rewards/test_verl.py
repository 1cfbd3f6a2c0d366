"""verl's `custom_reward_function`: `compute_score` loaded as verl loads it and called as verl calls it
(keywords only: data_source, solution_str, ground_truth, extra_info, plus reward_kwargs)."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

from tests.support.rewards import PLANS, run_http_agent
from tests.support.serve_process import Served
from webarena_live.rewards import RewardUnavailable

pytestmark = pytest.mark.timeout(300)


def verl_reward_fn(**reward_kwargs: object):  # type: ignore[no-untyped-def]
    """`pkg://webarena_live.rewards.verl` + `name: compute_score`, the config's reward_kwargs merged in."""
    function = importlib.import_module("webarena_live.rewards.verl").compute_score
    return lambda **call: function(**call, **reward_kwargs)


def test_compute_score_is_the_verdict(served: tuple[Served, Path], shop: str) -> None:
    control = served[0].control
    compute_score = verl_reward_fn(control=control)
    for label, plan in PLANS.items():
        run_http_agent(control, shop, f"verl-{label}", plan)
        text = (
            plan.answer if isinstance(plan.answer, str) else f"Done.\n```json\n{json.dumps(plan.answer)}\n```"
        )
        scored = compute_score(
            data_source="webarena-live",
            solution_str=text,
            ground_truth=None,
            extra_info={"webarena_session": f"verl-{label}", "index": 0},
        )
        assert scored["score"] == plan.score and scored["webarena_masked"] == 0.0, (label, scored)


def test_a_masked_reward_raises_unless_a_masked_score_is_configured(served: tuple[Served, Path]) -> None:
    control = served[0].control
    call = {
        "data_source": "webarena-live",
        "solution_str": "{}",
        "ground_truth": None,
        "extra_info": {"webarena_session": "verl-nobody"},
    }
    with pytest.raises(RewardUnavailable, match="unknown_session"):
        verl_reward_fn(control=control)(**call)
    flagged = verl_reward_fn(control=control, masked_score=-1.0)(**call)
    assert flagged["score"] == -1.0 and flagged["webarena_masked"] == 1.0
    assert flagged["webarena_reason"].startswith("unknown_session")
    with pytest.raises(ValueError, match="webarena_session"):
        verl_reward_fn(control=control)(**{**call, "extra_info": {}})
