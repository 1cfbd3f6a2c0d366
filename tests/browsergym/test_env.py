"""`webarena_live.browsergym.make_env` driven by scripted BrowserGym agents on three demo-shop replicas.

Right and wrong runs of a navigate, a retrieve and two mutate tasks, and a `report_infeasible`: every
reward is the reference's verdict (webarena-verified 1.2.3) on the HAR the proxy wrote, given once on
the step that sent the message to the user; every other step's reward is 0. Each run is judged three
ways (tests/support/threeway.py): live, the reference on our HAR, the reference on the HAR BrowserGym's
own browser context recorded (Playwright's `record_har_path`, through `pw_context_kwargs`). Beside it,
the reward BrowserGym's webarena-verified task would give the same run (the mean of the reference's evaluator
scores), for docs/browsergym.md. An episode closed before its answer gives its replica back at once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import gymnasium as gym
import pytest

from tests.browsergym.agents import PLANS, SEARCH_MUGS
from tests.site.harness import ProxyProcess
from tests.support.threeway import Judged, assert_three_ways, judge_three_ways
from webarena_live.browsergym import make_env, register_tasks
from webarena_live.client import Client, ControlAPIError

pytestmark = pytest.mark.timeout(400)


@dataclass
class Episode:
    plan: str
    task_id: int
    planned: str
    rewards: list[float] = field(default_factory=list)
    terminated: list[bool] = field(default_factory=list)
    finish: dict[str, Any] = field(default_factory=dict)
    replica: str = ""
    browser_har: Path | None = None


def run_plan(proxy: ProxyProcess, plan: str, hars: Path) -> Episode:
    task_id, steps, planned = PLANS[plan]
    episode = Episode(plan, task_id, planned, browser_har=hars / f"{plan}.har")
    record = {"record_har_path": str(episode.browser_har)}  # written when BrowserGym closes its context
    env = make_env(task_id, control=proxy.control_url, session=f"bgym-{plan}", run=f"bgym-{plan}", slow_mo=0,
                   pw_context_kwargs=record)  # fmt: skip
    try:
        obs, info = env.reset()
        episode.replica = info["webarena_live"]["replicas"]["__SHOPPING__"]
        for step in steps:
            obs, reward, terminated, _, info = env.step(step(obs))
            assert not obs["last_action_error"], obs["last_action_error"]
            episode.rewards.append(reward)
            episode.terminated.append(terminated)
            if terminated:
                episode.finish = info["webarena_live"]
                break
    finally:
        env.close()
    return episode


def test_a_closed_unfinished_episode_gives_its_replica_back_at_once(proxy: ProxyProcess) -> None:
    """Three mutating episodes hold the three replicas; a fourth cannot start. Closing one before its
    answer abandons its session, and the fourth starts at once (wait 0) on the replica it held. The
    closed one's browser started signed in from a storage state made for its leased copy."""
    client = Client(proxy.control_url)
    holders = [client.start(1005, session=f"holder-{n}") for n in range(2)]
    leased: list[dict[str, str]] = []

    def signed_in(replicas: dict[str, str]) -> dict[str, Any]:
        """A storage state made for the leased copy (a sign-in done before the session, not in it)."""
        leased.append(replicas)
        host = urlsplit(replicas["__SHOPPING__"]).hostname
        cookie = {"name": "signed_in", "value": "bgym", "domain": host, "path": "/", "expires": -1,
                  "httpOnly": False, "secure": False, "sameSite": "Lax"}  # fmt: skip
        return {"cookies": [cookie], "origins": []}

    env = make_env(
        1004, control=proxy.control_url, session="closed-early", slow_mo=0, storage_state=signed_in
    )
    try:
        obs, info = env.reset()
        held = info["webarena_live"]["replicas"]["__SHOPPING__"]
        assert leased == [{"__SHOPPING__": held}]
        first = client.har("closed-early")["log"]["entries"][0]["request"]
        cookies = [h["value"] for h in first["headers"] if h["name"].lower() == "cookie"]
        assert first["url"].startswith(held) and "signed_in=bgym" in " ".join(cookies), first
        assert held not in {h.replicas["__SHOPPING__"] for h in holders if h.replicas}
        with pytest.raises(ControlAPIError) as refused:
            client.start(1004, session="fourth", wait=0)
        assert refused.value.status == 503
        env.step(PLANS["mutate-right"][1][0](obs))  # opens the product page, changes nothing
    finally:
        env.close()
    state = client.session("closed-early")
    print("closed episode's session:", json.dumps(state)[:600])
    assert state.get("lease_ended"), state
    fourth = client.start(1004, session="fourth", wait=0)
    assert fourth.replicas == {"__SHOPPING__": held}
    for name in ("fourth", "holder-0", "holder-1"):
        client.abandon(name, "test over")
    client.close()


@pytest.fixture(scope="module")
def episodes(proxy: ProxyProcess, workdir: Path) -> list[Episode]:
    (workdir / "browser-hars").mkdir()
    return [run_plan(proxy, plan, workdir / "browser-hars") for plan in PLANS]


def test_reward_is_the_score_given_once_on_the_answering_step(episodes: list[Episode]) -> None:
    for episode in episodes:
        assert episode.terminated[-1] and not any(episode.terminated[:-1]), episode
        assert all(reward == 0.0 for reward in episode.rewards[:-1]), episode
        assert (
            episode.rewards[-1]
            == episode.finish["score"]
            == (1.0 if episode.finish["status"] == "success" else 0.0)
        )
        assert episode.finish["evaluators"] and "interference" in episode.finish
        assert episode.finish["status"] == episode.planned, (episode.plan, episode.finish["status"])
        # The finish names its session and says why each failing evaluator failed; the reward is no
        # masked sample (the environment did not fail these episodes).
        assert episode.finish["session"] == f"bgym-{episode.plan}"
        assert (
            not episode.finish["reward"]["masked"]
            and episode.finish["reward"]["value"] == episode.rewards[-1]
        )
        failing = [e for e in episode.finish["evaluators"] if e["status"] == "failure"]
        assert all(e["failed"] or e["error_msg"] for e in failing), failing


def written(proxy: ProxyProcess, episode: Episode) -> Path:
    return proxy.output_dir / f"bgym-{episode.plan}" / str(episode.task_id)


def test_every_reward_equals_the_reference_three_ways(
    episodes: list[Episode], proxy: ProxyProcess, oracle_python: Path, oracle_config: Path, workdir: Path
) -> None:
    runs = [
        Judged(e.plan, e.task_id, str(e.finish["status"]), written(proxy, e), e.browser_har, "on", e.planned)
        for e in episodes
    ]
    judge_three_ways(runs, oracle_python, oracle_config, workdir / "judged")
    assert_three_ways(runs)
    rows = []
    for episode, run in zip(episodes, runs, strict=True):
        assert episode.rewards[-1] == (1.0 if run.oracle_on_proxy == "success" else 0.0), run
        # BrowserGym's webarena-verified reward on the same run: the mean of the reference's evaluator
        # scores (its partial credit), from the result the reference wrote beside our HAR.
        generation = [r.task_id for r in runs[: runs.index(run)]].count(run.task_id)
        result = workdir / "judged" / "proxy" / f"run{generation}" / str(run.task_id) / "eval_result.json"
        reference = json.loads(result.read_text())
        scores = [e["score"] for e in reference["evaluators_results"]]
        browsergym = sum(scores) / len(scores) if scores else reference["score"]
        rows.append((episode.plan, episode.rewards[-1], run.oracle_on_proxy, round(browsergym, 2)))
    print("\nplan | our reward | reference on our HAR | BrowserGym's reward (the mean of the evaluators)")
    for row in rows:
        print(" | ".join(str(cell) for cell in row))
    # The wrong runs whose answer was right earn partial credit from BrowserGym's formula, none from ours.
    assert {plan for plan, ours, _, theirs in rows if ours == 0.0 and theirs > 0.0} == {
        "navigate-wrong",
        "mutate-wrong",
    }


def test_a_registered_gym_id_truncated_by_max_steps_abandons(proxy: ProxyProcess) -> None:
    """`register_tasks` names every loaded task `wa_live.<id>`; `gym.make` of one gives the environment,
    and reaching `max_steps` without an answer truncates the episode and ends its lease."""
    names = register_tasks(proxy.control_url)
    assert "wa_live.1003" in names and not any(name.startswith("webarena") for name in names)
    env = gym.make("browsergym/wa_live.1003", disable_env_checker=True, control=proxy.control_url,
                   slow_mo=0, max_steps=1)  # fmt: skip
    try:
        obs, info = env.reset()
        session = info["webarena_live"]["session"]
        obs, reward, terminated, truncated, info = env.step(SEARCH_MUGS[0](obs))
        assert (reward, terminated, truncated) == (0.0, False, True)
        with Client(proxy.control_url) as client:
            assert client.session(session).get("lease_ended"), client.session(session)
    finally:
        env.close()
