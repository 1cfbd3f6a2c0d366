"""OpenEnv for real: `WebArenaEnvironment` served by openenv-core's own server, driven by its own
WebSocket client, episodes in parallel over `serve --workers 2`; and `WebArenaSyncRubric` inside an
environment that drives a real Chromium itself (tests/rewards/openenv_browser_env.py).

Runs in a venv with `webarena-live[openenv]` (scripts/bootstrap.sh makes `.venv-openenv`).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from importlib.util import find_spec
from pathlib import Path

import httpx
import pytest

from tests.support.rewards import PLANS, serve_shop
from tests.support.serve_process import NAVIGATED, Served, browse, trace_urls
from webarena_live.launch import free_ports
from webarena_live.rewards.openenv_env import WebArenaAction, WebArenaEnvClient

pytestmark = pytest.mark.timeout(600)
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory, shop: str) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("openenv")
    served, _ = serve_shop(tmp, shop, "--workers", "2")
    yield served
    print(served.stop()[-3000:])


def openenv_server(app: str, control: str, *factory: str) -> Iterator[str]:
    """`uvicorn APP` (openenv-core's app) on a free port until it answers /health: its base URL."""
    (port,) = free_ports(1)
    env = {**os.environ, "WEBARENA_LIVE_CONTROL": control, "PYTHONPATH": str(REPO)}
    command = [
        sys.executable,
        "-m",
        "uvicorn",
        *factory,
        app,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "warning",
    ]
    process = subprocess.Popen(command, cwd=REPO, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120  # openenv-core 0.3 imports gradio on start
        while True:
            assert process.poll() is None, "the OpenEnv server exited"
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the OpenEnv server did not answer"
            time.sleep(0.3)
        yield url
    finally:
        process.terminate()
        process.wait(20)


@pytest.fixture(scope="module")
def environment_server(fleet: Served) -> Iterator[str]:
    yield from openenv_server(
        "webarena_live.rewards.openenv_env:create_webarena_app", fleet.control, "--factory"
    )


async def episode(url: str, shop: str, index: int) -> tuple[str, float | None, dict[str, object]]:
    """One episode through openenv-core's client: reset, browse through the observed proxy, answer."""
    label = list(PLANS)[index % len(PLANS)]
    plan = PLANS[label]
    async with WebArenaEnvClient(base_url=url) as env:
        started = await env.reset(task_id=plan.task_id, episode_id=f"oe-{index}")
        observation = started.observation
        assert observation.session == f"oe-{index}" and observation.proxy and not started.done
        assert observation.start_urls == [shop] and observation.intent
        paths = (f"/?by=oe-{index}", *plan.paths)
        for path in paths:
            await asyncio.to_thread(browse, str(observation.proxy), shop, path)
        state = await env.state()
        assert state.session == f"oe-{index}" and state.progress is not None and not state.finished
        ended = await env.step(WebArenaAction(answer=plan.answer))
        assert ended.done and ended.observation.masked is False, ended.observation
        return label, ended.reward, {"status": ended.observation.status, "expected": plan.score}


def test_thirty_two_concurrent_episodes_over_two_workers(
    environment_server: str, fleet: Served, shop: str
) -> None:
    async def all_episodes() -> list[tuple[str, float | None, dict[str, object]]]:
        return await asyncio.gather(*(episode(environment_server, shop, i) for i in range(32)))

    outcomes = asyncio.run(all_episodes())
    for index, (label, reward, seen) in enumerate(outcomes):
        assert reward == seen["expected"], (index, label, reward, seen)
    sessions = {
        view["session"]: view
        for view in httpx.get(f"{fleet.control}/sessions", timeout=10).json()["sessions"]
    }
    assert {sessions[f"oe-{i}"]["worker"] for i in range(32)} == {0, 1}
    for index in range(32):  # none crossed: each trace holds its own first page only
        urls = trace_urls(fleet.control, f"oe-{index}")
        assert [u for u in urls if "by=" in u] == [f"{shop}/?by=oe-{index}"], (index, urls)


def test_a_chromium_agent_through_an_episode(environment_server: str, shop: str) -> None:
    from playwright.sync_api import sync_playwright

    from tests.site.harness import CHROMIUM, CHROMIUM_ARGS
    from webarena_live.demo.agent import ATTEMPTS

    async def run() -> tuple[float | None, str | None]:
        async with WebArenaEnvClient(base_url=environment_server) as env:
            observation = (await env.reset(task_id=1004, episode_id="oe-chromium")).observation

            def act() -> object:
                with sync_playwright() as playwright:
                    args = [
                        *CHROMIUM_ARGS,
                        f"--proxy-server={observation.proxy}",
                        "--proxy-bypass-list=<-loopback>",
                    ]
                    browser = playwright.chromium.launch(executable_path=CHROMIUM, args=args)
                    try:
                        page = browser.new_page()
                        return next(a for a in ATTEMPTS if a.task_id == 1004).act(
                            page, observation.start_urls[0]
                        )
                    finally:
                        browser.close()

            answer = await asyncio.to_thread(act)
            ended = await env.step(WebArenaAction(answer=answer))
            return ended.reward, ended.observation.status

    assert asyncio.run(run()) == (1.0, "success")


def test_failures_reach_the_client_as_errors_or_masked_never_zero(
    environment_server: str, fleet: Served, shop: str
) -> None:
    async def run() -> None:
        async with WebArenaEnvClient(base_url=environment_server) as env:
            with pytest.raises(RuntimeError, match="4242"):  # a task the server does not have
                await env.reset(task_id=4242, episode_id="oe-no-task")
            await env.reset(task_id=1003, episode_id="oe-idle")  # the agent never browses
            ended = await env.step(WebArenaAction(answer=NAVIGATED))
            assert ended.done and ended.reward is None
            assert ended.observation.masked and ended.observation.kind == "no_events", ended.observation
            assert "no events" in (ended.observation.reason or "")

            # its worker killed mid-episode: the step waits for it to come back, the verdict is right
            started = (await env.reset(task_id=1003, episode_id="oe-killed")).observation
            await asyncio.to_thread(browse, str(started.proxy), shop, "/enamel-camp-mug.html")
            workers = httpx.get(f"{fleet.control}/health", timeout=10).json()["workers"]
            os.kill(workers[started_on(fleet, "oe-killed")]["pid"], signal.SIGKILL)
            ended = await env.step(WebArenaAction(answer=NAVIGATED))
            assert (ended.reward, ended.observation.masked) == (1.0, False), ended.observation

    asyncio.run(run())


def started_on(fleet: Served, session: str) -> int:
    listed = httpx.get(f"{fleet.control}/sessions", timeout=10).json()["sessions"]
    return int(next(view["worker"] for view in listed if view["session"] == session))


@pytest.fixture(scope="module")
def browser_env_server(fleet: Served) -> Iterator[str]:
    yield from openenv_server("tests.rewards.openenv_browser_env:app", fleet.control)


def test_the_rubric_scores_an_environment_that_drives_chromium(browser_env_server: str, shop: str) -> None:
    from openenv.core import GenericEnvClient

    async def run() -> None:
        async with GenericEnvClient(base_url=browser_env_server) as env:
            await env.reset(task_id=1003, session="rubric-right")
            step = await env.step({"goto": f"{shop}/"})
            assert (step.reward, step.done) == (0.0, False)  # not the final step: no verdict yet
            await env.step({"goto": f"{shop}/enamel-camp-mug.html"})
            final = await env.step({"answer": NAVIGATED})
            assert (final.reward, final.done) == (1.0, True)

            await env.reset(task_id=1003, session="rubric-short")
            await env.step({"goto": f"{shop}/"})
            final = await env.step({"answer": NAVIGATED})
            assert (final.reward, final.done) == (0.0, True)  # a real failure of the agent

            await env.reset(task_id=1003, session="rubric-misnamed")
            await env.step({"goto": f"{shop}/"})
            with pytest.raises(RuntimeError, match="unknown_session"):  # never a 0.0
                await env.step({"answer": NAVIGATED, "metadata": {"session": "no-such-session"}})

    asyncio.run(run())


def test_the_server_knows_the_state_class_and_openenv_is_the_distribution(environment_server: str) -> None:
    """openenv 0.10's `create_app` takes the state class: `/schema` shows `WebArenaState`'s fields. The
    extra installs the `openenv` distribution (the one `verifiers[openenv]` takes), never openenv-core,
    which would overwrite the same import package; verifiers imports beside it."""
    from importlib.metadata import PackageNotFoundError, version

    state = httpx.get(f"{environment_server}/schema", timeout=10).json()["state"]
    assert {"session", "task_id", "finished", "progress"} <= set(state["properties"]), state
    assert tuple(int(part) for part in version("openenv").split(".")[:2]) >= (0, 10)
    with pytest.raises(PackageNotFoundError):
        version("openenv-core")
    if find_spec("verifiers") is not None:  # the bootstrap's openenv venv has it beside
        import verifiers.v1  # noqa: F401
