"""A worker killed mid-episode (`serve --workers 2`, SIGKILL): while it is away its session's reward is
masked with the reason (never a 0.0); given patience, the reward is the verdict once the worker is back
with the session resumed from its journal; the other worker's sessions never notice."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import pytest
import requests

from tests.support.rewards import PLANS, run_http_agent, serve_shop
from tests.support.serve_process import Served, browse
from webarena_live.rewards import score

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory, shop: str) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("fleet")
    served, _ = serve_shop(tmp, shop, "--workers", "2")
    yield served
    print(served.stop()[-3000:])


def test_a_killed_worker_masks_then_the_verdict_comes_back(fleet: Served, shop: str) -> None:
    control = fleet.control
    plan = PLANS["navigate-right"]
    started = {name: run_http_agent(control, shop, name, PLANS["navigate-short"]) for name in ("w-a", "w-b")}
    assert {s["worker"] for s in started.values()} == {0, 1}
    victim_session = next(name for name, s in started.items() if s["worker"] == 1)
    other = next(name for name in started if name != victim_session)
    browse(started[victim_session]["proxy"], shop, plan.paths[-1])  # its plan now ends on the product page
    worker = requests.get(f"{control}/health", timeout=10).json()["workers"][1]
    os.kill(worker["pid"], signal.SIGKILL)
    # Until the front knows, a finish it forwards waits on the kept socket for the new process, and is
    # judged once the session is back: a true reward, but not the away case this test is about.
    deadline = time.monotonic() + 30
    while requests.get(f"{control}/health", timeout=10).json()["workers"][1]["state"] != "restarting":
        assert time.monotonic() < deadline, "the front never saw worker 1 die"
        time.sleep(0.02)

    away = score(victim_session, plan.answer, control=control, patience=0)
    assert (away.masked, away.kind, away.value) == (True, "worker_unavailable", None), away
    assert "503" in (away.reason or "") and "restarting" in (away.reason or "")
    # the other worker's session is judged meanwhile, untouched
    untouched = score(other, plan.answer, control=control, patience=0)
    assert (untouched.masked, untouched.value) == (False, 0.0)

    back = score(victim_session, plan.answer, control=control, patience=90)
    assert (back.masked, back.value, back.status) == (False, 1.0, "success"), back
