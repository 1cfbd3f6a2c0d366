"""`webarena_live.rewards.score` and `ascore` against a real `serve` in front of the demo shop.

HTTP agents and a real Chromium browse through their sessions' own addresses; every reward must be the
verdict's score (the finish's own answer, and the reference's on the written runs), a prose answer a
failure (not masked), and every run-time failure a masked reward with its reason, never a 0.0: an
unknown session, a session never finished, a control API that is not there, a site that went down
mid-episode.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import requests

from tests.support.rewards import PLANS, reference_verdicts, run_http_agent, serve_shop
from tests.support.serve_process import NAVIGATED, Served, browse, run_chromium_agent, start_session
from webarena_live.client import AsyncClient, Client, DifferentAnswer
from webarena_live.demo import site as demo_site
from webarena_live.evaluator import site_origins
from webarena_live.launch import free_ports
from webarena_live.rewards import Reward, RewardUnavailable, ascore, score
from webarena_live.rewards.reward import judged, sent_site_check, unreachable_site

pytestmark = pytest.mark.timeout(300)


def test_rewards_are_the_verdicts_and_the_reference_agrees(
    served: tuple[Served, Path], shop: str, oracle_python: Path, official_dataset: Path, tmp_path: Path
) -> None:
    server, out = served
    control = server.control
    rewards: dict[str, Reward] = {}
    for label, plan in PLANS.items():
        run_http_agent(control, shop, f"score-{label}", plan, run="score-" + label)
        rewards[label] = score(f"score-{label}", plan.answer, control=control)
    chromium = run_chromium_agent(control, 1004, run="score-chromium")
    rewards["chromium"] = score(chromium["session"], chromium["answer"], control=control)

    for label, plan in PLANS.items():
        reward = rewards[label]
        assert not reward.masked and reward.kind is None and reward.reason is None, (label, reward)
        assert reward.value == plan.score and reward.result is not None, (label, reward)
        assert reward.value == reward.result["score"]
    assert rewards["chromium"].value == 1.0 and rewards["chromium"].status == "success"
    # prose is judged as the reference judges it: a failure of the answer's format, not an outage
    assertions = rewards["not-json"].result["evaluators_results"][0]["assertions"]  # type: ignore[index]
    assert (
        rewards["not-json"].status == "failure"
        and assertions[0]["assertion_name"] == "agent_response_invalid_format"
    )

    for label, reward in rewards.items():
        run_dir = out / ("score-" + label)
        (task_dir,) = [p for p in run_dir.iterdir() if p.name.isdigit()]
        file = json.loads((task_dir / "eval_result.json").read_text())
        assert file == {k: v for k, v in reward.result.items() if k not in BESIDE_THE_VERDICT}, label
        assert reward.result["interference"]["exposed"] is False, label  # the finish's, beside the verdict
        reference = reference_verdicts(oracle_python, official_dataset, shop, run_dir, tmp_path)
        assert reference == {int(task_dir.name): (reward.status, reward.value)}, label


BESIDE_THE_VERDICT = ("interference", "sites_answered", "unanswered", "site_errors")
"""What the finish answers beside the verdict; `eval_result.json` holds the verdict alone."""


def test_a_finished_session_answers_for_its_own_answer_only(served: tuple[Served, Path], shop: str) -> None:
    """The same answer (however written) gets the same reward; a different one is masked and named,
    never given the first answer's verdict (docs/architecture.md, The finish), in `score`, `ascore` and
    the client."""
    control = served[0].control
    plan = PLANS["navigate-right"]
    run_http_agent(control, shop, "again", plan)
    first = score("again", plan.answer, control=control)
    assert first.value == 1.0 and first.result is not None and first.result["sites_answered"] is True
    assert score("again", control=control) == first  # no response: its verdict is read
    same = "```json\n" + json.dumps(dict(reversed(plan.answer.items())), indent=3) + "\n```"
    assert score("again", same, control=control) == first  # a retry after a lost answer
    wrong = {"task_type": "RETRIEVE", "status": "SUCCESS", "retrieved_data": [1]}
    for other in (
        score("again", wrong, control=control),
        asyncio.run(ascore("again", wrong, control=control)),
    ):
        assert (other.masked, other.kind, other.value, other.result) == (True, "different_answer", None, None)
        assert json.dumps(wrong, sort_keys=True) in (other.reason or "")
        assert json.dumps(plan.answer, sort_keys=True) in (other.reason or "")
        with pytest.raises(RewardUnavailable, match="different_answer"):
            other.require()
    assert asyncio.run(ascore("again", control=control)) == first

    with Client(control) as api:
        assert api.finish("again", plan.answer).score == 1.0
        with pytest.raises(DifferentAnswer) as refused:
            api.finish("again", wrong)
    assert (refused.value.status, refused.value.judged, refused.value.refused) == (409, plan.answer, wrong)

    async def async_refusal() -> DifferentAnswer:
        async with AsyncClient(control) as api:
            with pytest.raises(DifferentAnswer) as refused:
                await api.finish("again", wrong)
            return refused.value

    assert asyncio.run(async_refusal()).judged == plan.answer
    assert score("again", control=control) == first  # the refusals changed nothing


def test_ascore_gives_what_score_gives(served: tuple[Served, Path], shop: str) -> None:
    control = served[0].control

    async def episodes() -> list[Reward]:
        return await asyncio.gather(
            *(ascore(f"async-{label}", plan.answer, control=control) for label, plan in PLANS.items())
        )

    for label, plan in PLANS.items():
        run_http_agent(control, shop, f"async-{label}", plan)
    for reward, plan in zip(asyncio.run(episodes()), PLANS.values(), strict=True):
        assert (reward.masked, reward.value) == (False, plan.score), reward


def test_run_time_failures_are_masked_never_zero(served: tuple[Served, Path], shop: str) -> None:
    control = served[0].control
    unknown = score("nobody-started-me", NAVIGATED, control=control)
    assert (unknown.masked, unknown.value, unknown.kind) == (True, None, "unknown_session")
    assert "404" in (unknown.reason or "") and "nobody-started-me" in (unknown.reason or "")
    with pytest.raises(RewardUnavailable, match="unknown_session"):
        unknown.require()

    start_session(control, "still-running", 1003)
    running = score("still-running", control=control)  # nothing to read yet
    assert (running.masked, running.kind, running.value) == (True, "not_finished", None)
    idle = score("still-running", NAVIGATED, control=control)  # the proxy saw nothing: no verdict exists
    assert (idle.masked, idle.kind) == (True, "no_events"), idle

    (port,) = free_ports(1)
    away = score("anything", NAVIGATED, control=f"http://127.0.0.1:{port}")
    assert (away.masked, away.kind, away.value) == (True, "control_unreachable", None)
    assert (
        asyncio.run(ascore("anything", NAVIGATED, control=f"http://127.0.0.1:{port}")).kind
        == "control_unreachable"
    )


def test_a_site_that_went_down_mid_episode_masks_the_reward(tmp_path: Path, shop: str) -> None:
    """The shop answers the first page, then stops: the failing verdict is the outage's, not the agent's."""
    doomed = demo_site.serve("127.0.0.1", 0)
    server, _ = serve_shop(tmp_path, doomed.url)
    try:
        started = start_session(server.control, "outage", 1003)
        browse(started["proxy"], doomed.url, "/")
        doomed.shutdown()
        doomed.server_close()  # nothing listens there any more
        requests.get(
            f"{doomed.url}/enamel-camp-mug.html",
            proxies={"http": started["proxy"]},
            headers={"Accept": "text/html", "Sec-Fetch-Dest": "document", "Sec-Fetch-Mode": "navigate"},
            timeout=10,
        )
        # the trace asked for what the site never answered only (the server filters: `count` is the whole)
        unanswered = requests.get(
            f"{server.control}/sessions/outage/trace", params={"status": [0, 502]}, timeout=10
        )
        assert unanswered.json()["count"] == 2
        assert [e["url"] for e in unanswered.json()["events"]] == [f"{doomed.url}/enamel-camp-mug.html"]
        reward = score("outage", NAVIGATED, control=server.control)
        assert (reward.masked, reward.kind, reward.status) == (True, "site_unreachable", "failure"), reward
        assert "/enamel-camp-mug.html" in (reward.reason or "")
        # the finish said so itself (no second call); a server that does not is read the old way, from
        # the trace, and both ways find the same request
        assert reward.result is not None and reward.result["sites_answered"] is False
        assert reward.result["unanswered"]["count"] == 1
        origins = site_origins(requests.get(f"{server.control}/health", timeout=10).json()["sites"])
        from_trace = unreachable_site(unanswered.json()["events"], origins)
        assert from_trace == reward.result["unanswered"]["first"] == reward.reason
        old_server = {k: v for k, v in reward.result.items() if k not in ("sites_answered", "unanswered")}
        assert sent_site_check(old_server) == (False, None)  # nothing said: `score` reads the trace
        # a session of the same serve whose site answered keeps its verdict
        other = start_session(server.control, "other", 1003)
        assert other["proxy"]
    finally:
        print(server.stop()[-2000:])


def test_an_exposed_verdict_is_masked_and_keeps_its_score() -> None:
    """`interference` as the finish reports it: exposed masks the sample, not exposed (or absent) does not."""
    result = {"task_id": 1003, "status": "success", "score": 1.0, "evaluators_results": []}
    exposed = {
        **result,
        "interference": {
            "exposed": True,
            "mutations": [{"session": "s2", "method": "POST", "url": "http://shop/checkout/cart/add/"}],
        },
    }
    reward = judged("s1", exposed)
    assert (reward.masked, reward.kind, reward.value) == (True, "exposed", 1.0)
    assert "POST http://shop/checkout/cart/add/ by s2" in (reward.reason or "")
    assert judged("s1", {**result, "interference": {"exposed": False, "mutations": []}}).masked is False
    assert judged("s1", result).masked is False


def test_a_finish_after_the_lease_ended_is_masked() -> None:
    """A finish whose answer says the session's lease had ended (timeout, abandon, lost) is not the
    agent's doing: masked `lease_ended` with the reason, the verdict kept."""
    result = {"task_id": 1003, "status": "failure", "score": 0.0, "evaluators_results": []}
    ended = judged("s1", {**result, "lease_ended": "timeout", "sites_answered": True})
    assert (ended.masked, ended.kind, ended.value, ended.status) == (True, "lease_ended", 0.0, "failure")
    assert "timeout" in (ended.reason or "")
    with pytest.raises(RewardUnavailable, match="lease_ended"):
        ended.require()
    # ... and it is the first word: a lease that ended explains a site that stopped answering too
    down = judged("s1", {**result, "lease_ended": "abandoned"}, "the site did not answer GET http://x/")
    assert down.kind == "lease_ended"


def test_what_the_finish_says_of_the_sites_is_read_without_a_second_call() -> None:
    result = {"task_id": 1003, "status": "failure", "score": 0.0, "evaluators_results": []}
    assert sent_site_check({**result, "sites_answered": True}) == (True, None)
    first = "the site did not answer GET http://shop/: status 502"
    said = {**result, "sites_answered": False, "unanswered": {"count": 2, "first": first}}
    assert sent_site_check(said) == (True, first)
    reward = judged("s1", said, sent_site_check(said)[1])
    assert (reward.masked, reward.kind, reward.reason) == (True, "site_unreachable", first)
