"""OpenEnv: a rubric for environments that already drive a browser through a webarena-live session.

    class BrowserEnv(Environment):
        def __init__(self):
            super().__init__(rubric=WebArenaRubric())
        async def step_async(self, action, timeout_s=None, **kwargs):
            ...                                   # the browser acts, through the session's proxy
            observation.reward = await self._apply_rubric_async(action, observation)

On the step whose observation is `done`, the rubric finishes the session with the agent's final
response and returns the verdict's score (before that, `intermediate`, 0.0 by default, as OpenEnv's
trajectory rubrics do). The session is the observation's `session` field (or
`metadata["webarena_session"]`), the answer the action's `answer` field (or `metadata["answer"]`);
`session_of` and `answer_of` read them elsewhere. A masked reward raises `RewardUnavailable`: the
step fails and the client gets the error with its reason, never a 0.0; `last_reward` keeps it.
`WebArenaSyncRubric` is the same for environments whose `step` is synchronous. Needs
`pip install 'webarena-live[openenv]'`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from webarena_live.rewards import missing_extra
from webarena_live.rewards.reward import Reward, RewardUnavailable
from webarena_live.rewards.scoring import ascore, score

try:
    from openenv.core.rubrics import Rubric
except ImportError:
    raise missing_extra("openenv_rubric", "openenv", "openenv 0.10 or newer") from None

Reader = Callable[[Any, Any], Any]


def observed_session(action: Any, observation: Any) -> Any:
    return getattr(observation, "session", None) or (getattr(observation, "metadata", None) or {}).get(
        "webarena_session"
    )


def action_answer(action: Any, observation: Any) -> Any:
    if hasattr(action, "answer"):
        return action.answer
    return (getattr(action, "metadata", None) or {}).get("answer")


class _SessionRubric(Rubric):
    """What both rubrics read: where the session and the answer are, and the last reward."""

    def __init__(
        self,
        control: str | None = None,
        token: str | None = None,
        *,
        session_of: Reader | None = None,
        answer_of: Reader | None = None,
        intermediate: float = 0.0,
    ) -> None:
        super().__init__()
        self.control, self.token, self.intermediate = control, token, intermediate
        self.session_of = session_of or observed_session
        self.answer_of = answer_of or action_answer
        self.last_reward: Reward | None = None

    def _session(self, action: Any, observation: Any) -> str:
        session = self.session_of(action, observation)
        if not session:
            raise ValueError("the final observation names no webarena-live session (give session_of)")
        return str(session)

    def _value(self, reward: Reward) -> float:
        self.last_reward = reward
        return reward.require()


class WebArenaRubric(_SessionRubric):
    """The verdict's score on the final step, awaited (`_apply_rubric_async`)."""

    async def forward(self, action: Any, observation: Any) -> float:
        if not getattr(observation, "done", False):
            return self.intermediate
        session, answer = self._session(action, observation), self.answer_of(action, observation)
        return self._value(await ascore(session, answer, control=self.control, token=self.token))


class WebArenaSyncRubric(_SessionRubric):
    """`WebArenaRubric` for a synchronous `step` (`_apply_rubric`)."""

    def forward(self, action: Any, observation: Any) -> float:
        if not getattr(observation, "done", False):
            return self.intermediate
        session, answer = self._session(action, observation), self.answer_of(action, observation)
        return self._value(score(session, answer, control=self.control, token=self.token))


__all__ = ["RewardUnavailable", "WebArenaRubric", "WebArenaSyncRubric"]
