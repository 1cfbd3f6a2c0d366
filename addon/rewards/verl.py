"""verl's `custom_reward_function`: `compute_score` finishes the session a sample names.

verl calls it with keywords for every response it scores (its reward loop and its older reward
managers alike), so it is a plain synchronous function with verl's signature:

    reward:
      custom_reward_function:
        path: pkg://webarena_live.rewards.verl
        name: compute_score
        reward_kwargs:
          control: http://127.0.0.1:8081

The dataset row names the session in `extra_info` (`{"webarena_session": "agent-7"}`, optionally
`"webarena_control"`), the decoded response is the agent's final answer (JSON, or text holding a
```json fence; anything else is judged a failure, as the reference judges it). verl has no channel for
a sample that cannot be scored, so a masked reward raises `RewardUnavailable` with its reason, unless
`masked_score` is given in `reward_kwargs`: then that score is returned with `webarena_masked = 1`
beside it, for a trainer that filters on it. Needs no package beyond webarena-live.
"""

from __future__ import annotations

from typing import Any

from webarena_live.rewards.reward import RewardUnavailable
from webarena_live.rewards.scoring import score

SESSION_KEY = "webarena_session"
CONTROL_KEY = "webarena_control"


def compute_score(
    data_source: str | None = None,
    solution_str: str | None = None,
    ground_truth: Any = None,
    extra_info: dict[str, Any] | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """verl's reward of one response: `{"score": the verdict's score, "webarena_masked": 0.0, ...}`."""
    info = extra_info or {}
    session = info.get(SESSION_KEY)
    if not session:
        raise ValueError(f"extra_info has no {SESSION_KEY!r}: each row must name its webarena-live session")
    control = kwargs.get("control") or info.get(CONTROL_KEY)
    reward = score(
        str(session),
        solution_str if solution_str is not None else "",
        control=control,
        token=kwargs.get("token"),
        patience=float(kwargs.get("patience", 60.0)),
    )
    if reward.masked:
        if kwargs.get("masked_score") is None:
            raise RewardUnavailable(reward)
        return {
            "score": float(kwargs["masked_score"]),
            "webarena_masked": 1.0,
            "webarena_success": 0.0,
            "webarena_reason": f"{reward.kind}: {reward.reason}",
        }
    assert reward.value is not None
    return {
        "score": reward.value,
        "webarena_masked": 0.0,
        "webarena_success": 1.0 if reward.status == "success" else 0.0,
        "webarena_reason": "",
    }
