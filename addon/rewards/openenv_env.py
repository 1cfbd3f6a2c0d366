"""OpenEnv: an `Environment` whose episode is a webarena-live session, served by OpenEnv's server
(the `openenv` distribution, 0.10 or newer: the one `verifiers[openenv]` installs too).

    uvicorn --factory webarena_live.rewards.openenv_env:create_webarena_app --port 8000
    # WEBARENA_LIVE_CONTROL names the control API (default http://127.0.0.1:8081)

`reset(task_id=N, episode_id=..., session=..., reset_sites=False)` starts a session (`POST /sessions`:
replicas leased, sites reset when asked) and observes its intent, start URLs and its own proxy
address, through which the agent's browser goes; `step(WebArenaAction(answer=...))` finishes it with
the agent's final response and observes the reward and `done`; `state` is the progress so far (which
expected requests were seen). A masked reward is observed as `reward: None` with `masked`, `kind` and
`reason`, never as 0.0; a session that cannot start is an error of `reset`.

Each WebSocket connection of OpenEnv's server gets an environment of its own
(`SUPPORTS_CONCURRENT_SESSIONS`), so many episodes run at once. `WebArenaEnvClient` is the matching
OpenEnv client. Needs `pip install 'webarena-live[openenv]'`.
"""

from __future__ import annotations

import inspect
import uuid
from typing import Any

from webarena_live.client import AsyncClient, Client, ControlAPIError
from webarena_live.rewards import missing_extra
from webarena_live.rewards.reward import Reward
from webarena_live.rewards.scoring import ascore, score, shared_async_client, shared_client

try:
    from openenv.core.client_types import StepResult
    from openenv.core.env_client import EnvClient
    from openenv.core.env_server import Action, Environment, Observation, State, create_app
except ImportError:
    raise missing_extra("openenv_env", "openenv", "openenv 0.10 or newer") from None

MAX_CONCURRENT_EPISODES = 64


class WebArenaAction(Action):
    """The agent's final response (a JSON object, or text holding one): it ends the episode."""

    answer: Any = None


class WebArenaObservation(Observation):
    """After `reset`: the task and where to browse. After `step`: the verdict (`reward`, `done`)."""

    session: str = ""
    task_id: int | None = None
    intent: str = ""
    start_urls: list[str] = []
    proxy: str | None = None
    """The session's own proxy address: traffic through it is this episode's, with no credentials."""
    replicas: dict[str, Any] | None = None
    status: str | None = None
    masked: bool = False
    kind: str | None = None
    reason: str | None = None
    result: dict[str, Any] | None = None


class WebArenaState(State):
    session: str = ""
    task_id: int | None = None
    finished: bool = False
    progress: dict[str, Any] | None = None
    """The task's network evaluators satisfied so far (`GET /sessions/{s}/progress`)."""


class WebArenaEnvironment(Environment[WebArenaAction, WebArenaObservation, WebArenaState]):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, control: str | None = None, token: str | None = None) -> None:
        super().__init__()
        self.control, self.token = control, token
        self._state = WebArenaState()

    # reset ---------------------------------------------------------------------------------------
    # OpenEnv passes every keyword to a reset that takes `**kwargs`; both flavours read theirs with
    # `_plan`'s signature: reset(seed=None, episode_id=None, task_id=None, session=None,
    # reset_sites=False, run=..., restart=..., wait=...).
    def reset(self, *args: Any, **kwargs: Any) -> WebArenaObservation:
        episode_id, name, body = _plan(*args, **kwargs)
        return self._begin(episode_id, name, _started(shared_client(self.control, self.token), name, body))

    async def reset_async(self, *args: Any, **kwargs: Any) -> WebArenaObservation:
        episode_id, name, body = _plan(*args, **kwargs)
        started = await _astarted(shared_async_client(self.control, self.token), name, body)
        return self._begin(episode_id, name, started)

    def _begin(self, episode_id: str | None, name: str, started: dict[str, Any]) -> WebArenaObservation:
        self._state = WebArenaState(episode_id=episode_id or name, session=name, task_id=started["task_id"])
        return WebArenaObservation(
            session=name,
            task_id=started["task_id"],
            intent=started.get("intent", ""),
            start_urls=started.get("start_urls") or [],
            proxy=started.get("proxy"),
            replicas=started.get("replicas"),
        )

    # step ----------------------------------------------------------------------------------------
    def step(
        self, action: WebArenaAction, timeout_s: float | None = None, **kwargs: Any
    ) -> WebArenaObservation:
        self._check_running()
        return self._ended(score(self._state.session, action.answer, control=self.control, token=self.token))

    async def step_async(
        self, action: WebArenaAction, timeout_s: float | None = None, **kwargs: Any
    ) -> WebArenaObservation:
        self._check_running()
        reward = await ascore(self._state.session, action.answer, control=self.control, token=self.token)
        return self._ended(reward)

    def _check_running(self) -> None:
        if not self._state.session:
            raise RuntimeError("no episode: call reset(task_id=...) first")
        if self._state.finished:
            raise RuntimeError(f"episode {self._state.session!r} is finished: call reset for a new one")

    def _ended(self, reward: Reward) -> WebArenaObservation:
        self._state.step_count += 1
        self._state.finished = True
        return WebArenaObservation(
            done=True,
            reward=None if reward.masked else reward.value,
            session=reward.session,
            task_id=self._state.task_id,
            status=reward.status,
            masked=reward.masked,
            kind=reward.kind,
            reason=reward.reason,
            result=reward.result,
        )

    # state ---------------------------------------------------------------------------------------
    @property
    def state(self) -> WebArenaState:
        if self._state.session and not self._state.finished:
            try:
                progress = shared_client(self.control, self.token).progress(self._state.session)
                self._state.progress = progress.model_dump(mode="json")
            except Exception as error:  # the state stays readable while the API is away
                self._state.progress = {"error": str(error)}
        return self._state


def _plan(
    seed: int | None = None,
    episode_id: str | None = None,
    task_id: int | None = None,
    session: str | None = None,
    reset_sites: bool = False,
    **extra: Any,
) -> tuple[str | None, str, dict[str, Any]]:
    """A reset's arguments read: (episode id, session name, `POST /sessions` body)."""
    if task_id is None:
        raise ValueError("reset needs task_id: the WebArena-Verified task of this episode")
    name = session or episode_id or f"openenv-{uuid.uuid4().hex[:12]}"
    options: dict[str, Any] = {key: extra[key] for key in ("run", "restart", "wait") if key in extra}
    return episode_id, name, {"task_id": int(task_id), "session": name, "reset": reset_sites, **options}


def _started(api: Client, name: str, body: dict[str, Any]) -> dict[str, Any]:
    try:
        return api.start(**body).model_dump()
    except ControlAPIError as error:
        raise RuntimeError(f"session {name!r} could not start: {error}") from None


async def _astarted(api: AsyncClient, name: str, body: dict[str, Any]) -> dict[str, Any]:
    try:
        return (await api.start(**body)).model_dump()
    except ControlAPIError as error:
        raise RuntimeError(f"session {name!r} could not start: {error}") from None


def create_webarena_app(
    control: str | None = None, token: str | None = None, max_concurrent_envs: int = MAX_CONCURRENT_EPISODES
) -> Any:
    """OpenEnv's server app: one `WebArenaEnvironment` per WebSocket connection. Where `create_app`
    takes the state class (openenv 0.10), it is given ours, so `/state` and the schema show
    `WebArenaState`'s fields (the session, its progress) rather than the base `State`'s."""
    options: dict[str, Any] = {"env_name": "webarena-live", "max_concurrent_envs": max_concurrent_envs}
    if "state_cls" in inspect.signature(create_app).parameters:
        options["state_cls"] = WebArenaState
    return create_app(
        lambda: WebArenaEnvironment(control, token), WebArenaAction, WebArenaObservation, **options
    )


class WebArenaEnvClient(EnvClient[WebArenaAction, WebArenaObservation, WebArenaState]):
    """OpenEnv's WebSocket client for this environment."""

    def _step_payload(self, action: WebArenaAction) -> dict[str, Any]:
        return action.model_dump()

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[WebArenaObservation]:
        observation = WebArenaObservation(
            **payload.get("observation", {}), reward=payload.get("reward"), done=payload.get("done", False)
        )
        return StepResult(
            observation=observation, reward=payload.get("reward"), done=payload.get("done", False)
        )

    def _parse_state(self, payload: dict[str, Any]) -> WebArenaState:
        return WebArenaState(**payload)
