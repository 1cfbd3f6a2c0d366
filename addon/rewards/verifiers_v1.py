"""verifiers' `verifiers.v1` API (0.3.1 and 0.4.x): the session's verdict as a task reward.

    import verifiers.v1 as vf
    from webarena_live.rewards.verifiers_v1 import WebArenaRewards

    class ShopTask(WebArenaRewards, vf.Task[ShopData]):   # adds the `webarena` reward (weight 1)
        async def setup(self, trace, runtime):
            trace.info["webarena_session"] = ...             # the session this rollout browses in

or, for any task, the function named in its config:

    vf.TaskConfig(rewards={"webarena": {"fn": "webarena_live.rewards.verifiers_v1:webarena_reward"}})

verifiers calls a reward with the arguments it names: `task` (the row) and `trace` (the rollout). The
session is `trace.info["webarena_session"]` (per rollout: two rollouts of one row need two sessions),
else the row's `webarena_session` field; the final response is `trace.info["webarena_answer"]`, else
the rollout's last reply. The control API is `$WEBARENA_LIVE_CONTROL` (token
`$WEBARENA_LIVE_CONTROL_TOKEN`), or `control`/`token` on a `WebArenaRewards` subclass.

A masked reward raises `RewardUnavailable` (its kind and reason in the message): verifiers' scoring
boundary records it as a `TaskError` on the trace, the rollout failed and its reward left unscored,
never a 0.0. Every reward, masked or not, is kept in `trace.info["webarena_reward"]`.
Needs `pip install 'webarena-live[verifiers]'` (Python 3.12 or newer).
"""

from __future__ import annotations

from typing import Any, ClassVar

from webarena_live.rewards import missing_extra
from webarena_live.rewards.reward import Reward, RewardUnavailable
from webarena_live.rewards.scoring import ascore

VERIFIERS_V1 = "verifiers 0.3.1 or newer (verifiers.v1)"

try:
    import verifiers.v1 as vf
except ImportError:  # not installed, or older than the v1 API
    raise missing_extra("verifiers_v1", "verifiers", VERIFIERS_V1) from None

SESSION_KEY = "webarena_session"
ANSWER_KEY = "webarena_answer"
REWARD_KEY = "webarena_reward"


def rollout_session(task: Any, trace: Any) -> str:
    """The rollout's session: the trace's `info` first (set per rollout), else the row's field."""
    info = getattr(trace, "info", None) or {}
    session = info.get(SESSION_KEY) or getattr(task, SESSION_KEY, None)
    if not session:
        raise ValueError(
            f"the rollout names no session: set trace.info[{SESSION_KEY!r}] (e.g. in the task's setup) "
            f"or give the task data a {SESSION_KEY!r} field"
        )
    return str(session)


def rollout_answer(trace: Any) -> Any:
    """The final response: `trace.info["webarena_answer"]` when the rollout collected one, else the
    last reply's text (a ```json fence in it is read as the reference reads it)."""
    info = getattr(trace, "info", None) or {}
    if info.get(ANSWER_KEY) is not None:
        return info[ANSWER_KEY]
    return getattr(trace, "last_reply", "") or ""


async def webarena_reward(
    task: Any, trace: Any, *, control: str | None = None, token: str | None = None
) -> float:
    """The rollout's reward: its session's verdict score. A masked one raises `RewardUnavailable`, which
    verifiers records as the rollout's `TaskError`."""
    reward = await ascore(rollout_session(task, trace), rollout_answer(trace), control=control, token=token)
    keep(trace, reward)
    return reward.require()


def keep(trace: Any, reward: Reward) -> None:
    info = getattr(trace, "info", None)
    if isinstance(info, dict):
        info[REWARD_KEY] = {**reward.model_dump(), "status": reward.status}


class WebArenaRewards:
    """A mixin for a `vf.Task`: the `webarena` reward (weight 1), bound to `control` and `token`
    (None: the environment variables)."""

    control: ClassVar[str | None] = None
    token: ClassVar[str | None] = None

    @vf.reward
    async def webarena(self, task: Any, trace: Any) -> float:
        return await webarena_reward(task, trace, control=self.control, token=self.token)


__all__ = ["RewardUnavailable", "WebArenaRewards", "rollout_answer", "rollout_session", "webarena_reward"]
