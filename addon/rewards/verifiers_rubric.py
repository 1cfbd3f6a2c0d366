"""verifiers: a reward function and a rubric that score a rollout by finishing its session.

    import verifiers as vf
    from webarena_live.rewards.verifiers_rubric import WebArenaRubric

    env = vf.MultiTurnEnv(dataset=..., rubric=WebArenaRubric(control="http://127.0.0.1:8081"), ...)

The rollout names its session in `state["webarena_session"]` (set by the environment that started
it) or in its row's `info["webarena_session"]`; the final response is `state["webarena_answer"]`
when the environment collected one, else the text of the completion's last assistant message.

verifiers scores a reward function that raises as 0.0 (it logs the error and moves on), so a masked
reward cannot travel as an exception. It travels where verifiers puts infrastructure failures:
`state["error"]` becomes a `vf.InfraError` naming the reason (unless the rollout already has an
error), the reward function returns 0.0 beside it, the metric `webarena_masked` is 1 and
`state["webarena_reward"]` holds the whole `Reward`. Filter rollouts with an error (or
`webarena_masked`) out of training as any infrastructure failure. The legacy API, for verifiers 0.3.x
users (`pip install 'verifiers>=0.3.1,<0.4'`): 0.4 removed `vf.Rubric`, and importing this there
raises an ImportError saying so. New code: `webarena_live.rewards.verifiers_v1` (0.3.1 and 0.4.x).
"""

from __future__ import annotations

from typing import Any

from webarena_live.rewards import missing_extra
from webarena_live.rewards.reward import Reward
from webarena_live.rewards.scoring import ascore

try:
    import verifiers as vf
except ImportError:
    raise missing_extra("verifiers_rubric", "verifiers", "verifiers") from None
if not hasattr(vf, "Rubric"):  # 0.4 and newer: only `verifiers.v1`
    raise ImportError(
        f"webarena_live.rewards.verifiers_rubric needs the legacy vf.Rubric of verifiers 0.3.x (this is "
        f"{getattr(vf, '__version__', 'a newer one')}): use webarena_live.rewards.verifiers_v1, or "
        "pip install 'verifiers>=0.3.1,<0.4'"
    )

SESSION_KEY = "webarena_session"
ANSWER_KEY = "webarena_answer"
REWARD_KEY = "webarena_reward"


def completion_text(completion: Any) -> str:
    """The last assistant message's text of a completion (messages, or plain text)."""
    if isinstance(completion, str):
        return completion
    for message in reversed(list(completion or [])):
        role = message.get("role") if isinstance(message, dict) else getattr(message, "role", None)
        if role != "assistant":
            continue
        content = message.get("content") if isinstance(message, dict) else getattr(message, "content", None)
        if isinstance(content, list):  # content parts
            return "".join(
                str(part.get("text", "")) if isinstance(part, dict) else str(getattr(part, "text", ""))
                for part in content
            )
        return str(content or "")
    return ""


def rollout_session(state: Any, info: Any) -> str:
    session = state.get(SESSION_KEY) or (info or {}).get(SESSION_KEY)
    if not session:
        raise ValueError(f"the rollout names no session: set state[{SESSION_KEY!r}] or info[{SESSION_KEY!r}]")
    return str(session)


def mark_masked(state: Any, reward: Reward) -> None:
    """The masked reward where verifiers keeps infrastructure failures: the rollout's error."""
    if state.get("error") is not None:
        return
    error = vf.InfraError(
        f"webarena-live: no reward for session {reward.session!r}: {reward.kind}: {reward.reason}"
    )
    if hasattr(state, "_set_error"):
        state._set_error(error)
    else:
        state["error"] = error


async def webarena_reward(
    completion: Any = None,
    state: Any = None,
    info: Any = None,
    *,
    control: str | None = None,
    token: str | None = None,
    **kwargs: Any,
) -> float:
    """The rollout's reward: the verdict's score of its session; a masked one marks the rollout."""
    state = state if state is not None else {}
    answer = state.get(ANSWER_KEY) if state.get(ANSWER_KEY) is not None else completion_text(completion)
    reward = await ascore(rollout_session(state, info), answer, control=control, token=token)
    state[REWARD_KEY] = {**reward.model_dump(), "status": reward.status}
    if reward.masked or reward.value is None:
        mark_masked(state, reward)
        return 0.0
    return reward.value


def webarena_masked(state: Any = None, **kwargs: Any) -> float:
    """1.0 when the rollout's reward is masked (a metric; it runs after `webarena_reward`)."""
    held = (state or {}).get(REWARD_KEY) or {}
    return 1.0 if held.get("masked") else 0.0


class WebArenaRubric(vf.Rubric):
    """`webarena_reward` (weight 1) and the `webarena_masked` metric, bound to a control API."""

    def __init__(self, control: str | None = None, token: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.control, self.token = control, token
        self.add_reward_func(self.webarena_reward, weight=1.0)
        self.add_metric(webarena_masked)

    async def webarena_reward(self, completion: Any = None, state: Any = None, info: Any = None) -> float:
        return await webarena_reward(completion, state, info, control=self.control, token=self.token)
