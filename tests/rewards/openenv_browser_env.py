"""An OpenEnv environment that drives a real Chromium itself, scored by `WebArenaSyncRubric`: what a team
whose environment already owns the browser plugs the rubric into. Served by openenv-core's own server
(`uvicorn tests.rewards.openenv_browser_env:app`); the control API is `$WEBARENA_LIVE_CONTROL`.

`reset(task_id=N, session=S)` starts the session and opens Chromium on its own proxy address; a step
with `goto` navigates, a step with `answer` ends the episode (the rubric finishes the session);
`session` in an action's metadata overrides the session the final observation names (to name a wrong
one on purpose).
"""

from __future__ import annotations

from typing import Any

from openenv.core.env_server import Action, Environment, Observation, State, create_app
from playwright.sync_api import sync_playwright

from tests.site.harness import CHROMIUM, CHROMIUM_ARGS
from webarena_live.client import Client
from webarena_live.rewards.openenv_rubric import WebArenaSyncRubric
from webarena_live.rewards.scoring import control_url


class BrowserAction(Action):
    goto: str | None = None
    answer: Any = None


class BrowserObservation(Observation):
    session: str = ""
    url: str = ""
    start_urls: list[str] = []


class BrowserEnv(Environment[BrowserAction, BrowserObservation, State]):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__(rubric=WebArenaSyncRubric())
        self._state = State()
        self.session = ""
        self._playwright: Any = None
        self._browser: Any = None
        self._page: Any = None

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        task_id: int = 1003,
        session: str = "",
        **kwargs: Any,
    ) -> BrowserObservation:
        self._reset_rubric()
        self.close()
        with Client(control_url(None)) as api:
            started = api.start(task_id, session=session, restart=True)
        self.session = session
        self._state = State(episode_id=episode_id or session)
        self._playwright = sync_playwright().start()
        args = [*CHROMIUM_ARGS, f"--proxy-server={started.proxy}", "--proxy-bypass-list=<-loopback>"]
        self._browser = self._playwright.chromium.launch(executable_path=CHROMIUM, args=args)
        self._page = self._browser.new_page()
        return BrowserObservation(session=session, start_urls=started.start_urls)

    def step(
        self, action: BrowserAction, timeout_s: float | None = None, **kwargs: Any
    ) -> BrowserObservation:
        self._state.step_count += 1
        if action.goto is not None:
            self._page.goto(action.goto)
        done = action.goto is None
        named = action.metadata.get("session") or self.session
        observation = BrowserObservation(session=named, url=self._page.url, done=done)
        observation.reward = self._apply_rubric(action, observation)
        if done:
            self.close()
        return observation

    @property
    def state(self) -> State:
        return self._state

    def close(self) -> None:
        if self._browser is not None:
            self._browser.close()
            self._playwright.stop()
            self._browser = self._playwright = None


app = create_app(BrowserEnv, BrowserAction, BrowserObservation, env_name="browser", max_concurrent_envs=4)
