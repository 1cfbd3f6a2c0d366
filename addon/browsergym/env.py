"""`make_env`: BrowserGym's BrowserEnv over a webarena-live session.

The session is the episode: `reset()` starts one (`POST /sessions`, waiting up to `wait` seconds for a
free replica), the browser is launched with the session's own proxy address (no credentials, so
Chromium keeps its cache on, as in BrowserGym's own runs), and the task opens the start URLs rendered
on the leased replicas. The finish happens inside BrowserGym's own `validate` step; anything that ends
an episode without one (close, truncation, a failed reset, the next reset) abandons the session, so
its replicas go back to the pool at once (docs/architecture.md, Replicas).

The reward follows the rewards' own rule (`webarena_live.rewards.reward.judged`): the verdict's score,
or, when the environment failed the agent (its lease ended, its replica was exposed to another
session's changes, a site did not answer or answered failures), NaN: a float no trainer can take for
the agent's 0.0, with `info["webarena_live"]["reward"]` saying why. `plain_score=True` gives the score
in every case.
"""

from __future__ import annotations

import math
import os
import uuid
from typing import Any

from browsergym.core.env import BrowserEnv

from webarena_live.browsergym.task import INFEASIBLE_STATUS, INFEASIBLE_TASK_TYPE, LiveTask
from webarena_live.browsergym.tokens import offline_token_counts
from webarena_live.client import Client, ControlAPIError, Started, token_from_env
from webarena_live.rewards.reward import Reward, judged, sent_site_check

DEFAULT_CONTROL = "http://127.0.0.1:8081"
DEFAULT_WAIT = 600.0
"""Seconds a reset waits for a free replica (the proxy answers 503 after that)."""
MASKED_REWARD = math.nan
"""The reward of an episode the environment failed (the rewards' masked sample): not a number, so
no sum or mean takes it for the agent's doing; `info["webarena_live"]["reward"]` has the kind and reason."""


class LiveBrowserEnv(BrowserEnv):
    """A BrowserGym environment whose episodes are webarena-live sessions of one task."""

    def __init__(
        self,
        task_id: int,
        *,
        control: str | None = None,
        token: str | None = None,
        session: str | None = None,
        wait: float = DEFAULT_WAIT,
        run: str | None = None,
        storage_state: Any = None,
        infeasible_status: str = INFEASIBLE_STATUS,
        infeasible_task_type: str = INFEASIBLE_TASK_TYPE,
        max_steps: int | None = None,
        task_kwargs: dict[str, Any] | None = None,
        pw_chromium_kwargs: dict[str, Any] | None = None,
        pw_context_kwargs: dict[str, Any] | None = None,
        plain_score: bool = False,
        **browser_env_kwargs: Any,
    ) -> None:
        # BrowserGym's experiment loops (EnvArgs.make_env) can only hand an environment `task_kwargs`:
        # the control API's address and token may come that way too.
        extra = dict(task_kwargs or {})
        control = extra.pop("control", None) or control or os.environ.get("WEBARENA_LIVE_CONTROL")
        token = extra.pop("token", None) or token or token_from_env()
        session, run = extra.pop("session", None) or session, extra.pop("run", None) or run
        if extra:
            raise TypeError(f"unknown task_kwargs for a webarena-live task: {sorted(extra)}")
        self.task_id = task_id
        self.client = Client(control or DEFAULT_CONTROL, token=token, verify=False)
        self.session_name, self.wait, self.run_name = session, wait, run
        self.storage_state, self.max_steps, self.plain_score = storage_state, max_steps, plain_score
        self.infeasible = dict(infeasible_status=infeasible_status, infeasible_task_type=infeasible_task_type)
        self.started: Started | None = None
        self.finished = False
        self.finished_session = ""
        self.episodes = 0
        self.steps = 0
        self._chromium_kwargs = dict(pw_chromium_kwargs or {})
        self._context_kwargs = dict(pw_context_kwargs or {})
        # The experiment loop that drives this environment runs in this process (AgentLab's and
        # BrowserGym's make it in their worker): its token counts must not need a download.
        offline_token_counts()
        super().__init__(task_entrypoint=self._make_task, **browser_env_kwargs)

    def _make_task(self, seed: int | None = None) -> LiveTask:
        assert self.started is not None
        return LiveTask(
            seed,
            intent=self.started.intent,
            start_urls=list(self.started.start_urls),
            finish=self._finish,
            **self.infeasible,
        )

    def _finish(self, response: Any) -> dict[str, Any]:
        assert self.started is not None
        document = self.client.finish_document(self.started.session, response)
        self.finished, self.finished_session = True, self.started.session
        return document

    def abandon(self, reason: str) -> None:
        """Give the session's replicas back now (an episode ended without a final response)."""
        if self.started is None or self.finished:
            return
        session, self.started = self.started.session, None
        try:
            self.client.abandon(session, reason)
        except ControlAPIError as error:
            if error.status != 404:  # a session the proxy no longer knows holds nothing
                raise

    def _next_session_name(self) -> str:
        self.episodes += 1
        if self.session_name is None:
            return f"bgym-{self.task_id}-{uuid.uuid4().hex[:10]}"
        return self.session_name if self.episodes == 1 else f"{self.session_name}-{self.episodes}"

    def reset(
        self, seed: int | None = None, *args: Any, **kwargs: Any
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        self.abandon("reset")
        self.finished, self.steps = False, 0
        options: dict[str, Any] = {"wait": self.wait, "run": self.run_name}
        self.started = self.client.start(self.task_id, session=self._next_session_name(), **options)
        if not self.started.proxy:
            self.abandon("no proxy address")
            raise RuntimeError(
                "the proxy gave the session no address of its own (a fleet front without ports?)"
            )
        self.pw_chromium_kwargs = {**self._chromium_kwargs, "proxy": {"server": self.started.proxy}}
        self.pw_context_kwargs = dict(self._context_kwargs)
        state = (
            self.storage_state(dict(self.started.replicas or {}))
            if callable(self.storage_state)
            else self.storage_state
        )
        if state is not None:
            self.pw_context_kwargs["storage_state"] = state
        try:
            obs, info = super().reset(seed, *args, **kwargs)
        except BaseException:
            self.abandon("reset failed")
            raise
        assert isinstance(self.task, LiveTask)
        self.task.first_agent_message = len(self.chat.messages)
        info["webarena_live"] = {
            "session": self.started.session,
            "proxy": self.started.proxy,
            "replicas": self.started.replicas,
            "start_urls": self.started.start_urls,
        }
        return obs, info

    def step(self, action: str) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        already = self.task.result if isinstance(self.task, LiveTask) else None
        obs, reward, terminated, truncated, info = super().step(action)
        self.steps += 1
        result = self.task.result if isinstance(self.task, LiveTask) else None
        if result is not None and already is None:
            judgement = episode_reward(self.finished_session, result)
            if judgement.masked and not self.plain_score:
                reward = MASKED_REWARD
            # Also in `task_info`, which experiment loops keep with each step (BrowserGym, AgentLab).
            info["webarena_live"] = finish_summary(result, judgement)
            info["task_info"] = {**(info.get("task_info") or {}), "webarena_live": info["webarena_live"]}
        elif terminated and result is None:
            # BrowserGym ended the episode without a message to the user: nothing to judge.
            self.abandon("terminated without a final response")
        if self.max_steps is not None and self.steps >= self.max_steps and not terminated:
            truncated = True
            self.abandon("truncated")
        return obs, float(reward), terminated, truncated, info

    def close(self) -> None:
        try:
            self.abandon("closed")
        finally:
            super().close()
            self.client.close()


def episode_reward(session: str, result: dict[str, Any]) -> Reward:
    """The rewards' rule on the finish's answer: the score, or a masked sample and why (the answer
    says whether the task's sites answered)."""
    return judged(session, result, sent_site_check(result)[1])


def failed_assertions(evaluator: dict[str, Any]) -> list[str]:
    """Why an evaluator failed, one line per check that did not pass (`name: messages`): a network
    check's reason is in its assertions, its `error_msg` (an error's) empty."""
    lines = []
    for assertion in evaluator.get("assertions") or []:
        if isinstance(assertion, dict) and assertion.get("status") != "success":
            said = assertion.get("assertion_msgs") or [assertion.get("error_msg") or ""]
            lines.append(f"{assertion.get('assertion_name')}: {'; '.join(map(str, said))}".rstrip(": "))
    return lines


def finish_summary(result: dict[str, Any], reward: Reward) -> dict[str, Any]:
    """`info["webarena_live"]` of the finishing step: the session, the verdict, each evaluator, the
    interference, and the reward by the rewards' rule (`value`, `masked`, `kind`, `reason`)."""
    return {
        "session": reward.session,
        "status": result.get("status"),
        "score": result.get("score"),
        "evaluators": [
            {
                **{key: evaluator.get(key) for key in ("evaluator_name", "status", "score", "error_msg")},
                "failed": failed_assertions(evaluator),
            }
            for evaluator in result.get("evaluators_results") or []
        ],
        "interference": result.get("interference"),
        "lease_ended": result.get("lease_ended"),
        "reward": {key: getattr(reward, key) for key in ("value", "masked", "kind", "reason")},
        "result": result,
    }


def make_env(
    task_id: int,
    *,
    control: str | None = None,
    token: str | None = None,
    session: str | None = None,
    **browser_env_kwargs: Any,
) -> LiveBrowserEnv:
    """A gymnasium environment for one task of the proxy at `control` (its control API's URL).

    Keyword arguments beyond these go to BrowserGym's BrowserEnv (headless, slow_mo, timeout, viewport,
    action_mapping, pw_chromium_kwargs, ...) or are this environment's: `wait` (seconds to wait for a
    free replica), `run` (the run directory's name), `storage_state` (a Playwright storage state, or a
    function of the leased replicas returning one: a sign-in that lands in no trace),
    `infeasible_status` and `infeasible_task_type` (the answer
    `report_infeasible` gives), `max_steps` (truncation, which abandons the session), `plain_score`
    (the verdict's score as the reward even when the environment failed the episode, instead of NaN).
    The token defaults to $WEBARENA_LIVE_CONTROL_TOKEN (the variable `serve` reads).
    """
    return LiveBrowserEnv(task_id, control=control, token=token, session=session, **browser_env_kwargs)
