"""BrowserGym's environment as a client of the control API: the token it reads, the reward of an
episode the environment failed, and what a start that waits for a replica says.

- The token: `make_env`, `register_tasks` (and the study recipe) read WEBARENA_LIVE_CONTROL_TOKEN, the
  variable `serve` reads; the old WEBARENA_LIVE_TOKEN alone still works, with a FutureWarning; with
  neither, the 401 names the variable. A real `serve --control-token`.
- The reward: an episode whose lease ended before its answer is a masked sample by the rewards' own
  rule — NaN, and `info["webarena_live"]["reward"]` says `lease_ended` — or the plain score with
  `plain_score=True`.
- Waiting: a start that waits for a free replica logs a line once it waits and every
  WAIT_NOTICE_EVERY seconds after, naming the session, the task and its sites.
"""

from __future__ import annotations

import logging
import math
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.browsergym.conftest import Shop
from tests.site.harness import ProxyProcess, start_proxy, write_config
from webarena_live import client as client_module
from webarena_live.addresses.credentials import CONTROL_TOKEN_ENV
from webarena_live.browsergym import make_env, register_tasks
from webarena_live.client import Client, ControlAPIError, Started

pytestmark = pytest.mark.timeout(300)
TOKEN = "bgym-token-1234567890"


@pytest.fixture(scope="module")
def guarded(workdir: Path, shops: list[Shop]) -> Iterator[ProxyProcess]:
    """A proxy that wants a control token (no replicas needed: nothing is started on it)."""
    config = write_config(workdir / "guarded-sites.json", {"__SHOPPING__": {"urls": [shops[0].url]}})
    running = start_proxy(workdir / "guarded", tasks=Path(__file__).parents[2] / "tasks" / "demo.json",
                          config=config, extra_args=["--control-token", TOKEN])  # fmt: skip
    yield running
    running.stop()


def test_one_token_variable_the_one_serve_reads(
    guarded: ProxyProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert client_module.TOKEN_ENV == CONTROL_TOKEN_ENV
    monkeypatch.delenv("WEBARENA_LIVE_TOKEN", raising=False)
    monkeypatch.delenv(CONTROL_TOKEN_ENV, raising=False)
    with pytest.raises(ControlAPIError) as refused:
        register_tasks(guarded.control_url)
    assert refused.value.status == 401 and CONTROL_TOKEN_ENV in str(refused.value), str(refused.value)

    monkeypatch.setenv(CONTROL_TOKEN_ENV, TOKEN)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new name: no warning
        assert "wa_live.1001" in register_tasks(guarded.control_url)
        env = make_env(1001, control=guarded.control_url)
    try:
        assert env.client.tasks()  # a real request, with the token the variable holds
    finally:
        env.close()


def test_the_old_token_variable_alone_is_read_with_a_warning(
    guarded: ProxyProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(CONTROL_TOKEN_ENV, raising=False)
    monkeypatch.setenv("WEBARENA_LIVE_TOKEN", TOKEN)
    with pytest.warns(FutureWarning, match=CONTROL_TOKEN_ENV):
        assert "wa_live.1003" in register_tasks(guarded.control_url)
    with pytest.warns(FutureWarning, match=CONTROL_TOKEN_ENV):
        env = make_env(1003, control=guarded.control_url)
    try:
        assert env.client.tasks()
    finally:
        env.close()


@pytest.mark.parametrize("plain_score", [False, True], ids=["masked", "plain score"])
def test_an_episode_whose_lease_ended_is_a_masked_reward(proxy: ProxyProcess, plain_score: bool) -> None:
    session = f"ended-{'plain' if plain_score else 'masked'}"
    env = make_env(1001, control=proxy.control_url, session=session, slow_mo=0, plain_score=plain_score)
    try:
        env.reset()
        with Client(proxy.control_url) as api:
            api.abandon(session, "the harness took the replica back")
        answer = '{"task_type": "RETRIEVE", "status": "SUCCESS", "retrieved_data": ["$34.99"]}'
        _, reward, terminated, _, info = env.step(f"send_msg_to_user({answer!r})")
    finally:
        env.close()
    said = info["webarena_live"]
    assert terminated and said["session"] == session and said["lease_ended"], said
    assert said["reward"]["masked"] and said["reward"]["kind"] == "lease_ended", said["reward"]
    assert "lease ended" in said["reward"]["reason"]
    if plain_score:
        assert reward == said["score"] == said["reward"]["value"]
    else:
        assert math.isnan(reward)


def test_a_start_that_waits_for_a_replica_says_so(
    proxy: ProxyProcess, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(client_module, "WAIT_NOTICE_AFTER", 0.3)
    monkeypatch.setattr(client_module, "WAIT_NOTICE_EVERY", 0.5)
    api = Client(proxy.control_url)
    holders = [api.start(1004, session=f"waits-holder-{n}") for n in range(3)]  # each writer holds a copy
    got: list[Started] = []
    waiting = threading.Thread(target=lambda: got.append(api.start(1005, session="waits", wait=60)))
    with caplog.at_level(logging.WARNING, logger="webarena_live.client"):
        waiting.start()
        time.sleep(1.6)
        lines = [r.getMessage() for r in caplog.records if "waits for a free replica" in r.getMessage()]
        api.abandon("waits-holder-0", "let the waiting one in")
        waiting.join(60)
    try:
        assert got and got[0].replicas == holders[0].replicas
        # At start (0.3 s) and every 0.5 s after: three lines in 1.6 s, each naming what it waits for.
        assert len(lines) >= 3, lines
        assert all(
            line.startswith("session 'waits' (task 1005) waits for a free replica of ") for line in lines
        )
        assert "up to 60 s" in lines[0]
        after = [r for r in caplog.records if "waits for a free replica" in r.getMessage()]
        time.sleep(0.8)
        assert len([r for r in caplog.records if "waits for a free replica" in r.getMessage()]) == len(after)
    finally:
        for name in ("waits", "waits-holder-1", "waits-holder-2"):
            api.abandon(name, "test over")
        api.close()
