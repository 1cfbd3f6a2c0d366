"""browser-use as its users write it: the guide's recipe run as written, and its own `Agent` loop playing
right and wrong runs of navigate, retrieve and mutate tasks through sessions' own addresses — each judged
live as it should be, the reference agreeing on the written runs — and, without `<-loopback>` in its
bypass list, the finish saying nothing was captured (browser-use passes Chromium a bare --proxy-server)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
import requests

from tests.browseruse.agent import Script, run_agent
from tests.e2e.test_readme_examples import Demo, demo, example
from tests.support.rewards import reference_verdicts
from tests.support.serve_process import Served
from webarena_live.client import AsyncClient, ControlAPIError

__all__ = ["demo"]  # a fixture: the guide's demo, running

pytestmark = pytest.mark.timeout(600)

NAVIGATED = {"action": "navigate", "status": "SUCCESS", "results": None}
MUTATED = {"action": "mutate", "status": "SUCCESS", "results": None}
SCRIPTS = {
    "navigate-right": Script(1003, ({"click_text": "Enamel Camp Mug"},), NAVIGATED),
    "navigate-wrong": Script(1003, ({"click_text": "Stoneware Coffee Mug 12 oz"},), NAVIGATED),
    "retrieve-right": Script(1001, ({"click_text": "Aurora Desk Lamp"},), {**NAVIGATED, "action": "retrieve",
                                                                           "results": [34.99]}),
    "retrieve-wrong": Script(1001, ({"click_text": "Aurora Desk Lamp"},), {**NAVIGATED, "action": "retrieve",
                                                                           "results": [19.99]}),
    "mutate-right": Script(1004, ({"click_text": "Trailblazer Hiking Backpack 40L"},
                                  {"click_text": "Add to Cart"}), MUTATED),
    "mutate-wrong": Script(1004, ({"click_text": "Trailblazer Hiking Backpack 40L"},), MUTATED),
}  # fmt: skip


def test_the_guides_browser_use_recipe_runs_as_written(demo: Demo) -> None:
    printed = demo.run([sys.executable], example("browser-use"), ".py", timeout=240)
    assert printed.strip().splitlines()[-1] == "success 1.0", printed[-3000:]
    control = f"http://127.0.0.1:{demo.ports['8081']}"
    view = requests.get(f"{control}/sessions/browser-use-1", timeout=10).json()
    assert sorted(Path(path).name for path in view["outputs"].values()) == [
        "agent_response.json", "attempt.json", "eval_result.json", "network.har",
    ]  # fmt: skip


def test_its_runs_are_judged_live_and_the_reference_agrees(
    served: tuple[Served, Path], shop: str, oracle_python: Path, official_dataset: Path, tmp_path: Path
) -> None:
    server, out = served

    async def play() -> dict[str, tuple[str, float]]:
        verdicts = {}
        async with AsyncClient(server.control) as control:
            for name, script in SCRIPTS.items():
                session = f"browser-use-{name}"
                await run_agent(control, session, script, run=name.split("-")[1])
                result = await control.finish(session, script.answer)
                verdicts[name] = (result.status.value, result.score)
        return verdicts

    live = asyncio.run(play())
    assert live == {
        name: ("success", 1.0) if name.endswith("right") else ("failure", 0.0) for name in SCRIPTS
    }
    for run in ("right", "wrong"):
        reference = reference_verdicts(oracle_python, official_dataset, shop, out / run, tmp_path)
        told = {SCRIPTS[name].task_id: verdict for name, verdict in live.items() if name.endswith(run)}
        assert reference == told, (run, reference, told)


def test_without_loopback_in_its_bypass_list_nothing_is_captured(served: tuple[Served, Path]) -> None:
    server, _ = served

    async def play() -> str:
        async with AsyncClient(server.control) as control:
            session = "browser-use-bare"
            await run_agent(control, session, SCRIPTS["navigate-right"], run="bare", bypass=None)
            with pytest.raises(ControlAPIError) as refused:
                await control.finish(session, NAVIGATED)
            await control.abandon(session, "nothing captured")
            return f"{refused.value.status} {refused.value.error}"

    assert asyncio.run(play()) == "409 no_events"
