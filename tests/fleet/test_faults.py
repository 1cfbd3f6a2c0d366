"""`serve --workers 2` under faults a user meets: a worker that stops answering (SIGSTOP), a worker
killed under a real Chromium mid-run, a resume that cannot succeed.

A stopped worker is not dead: `/health` answers within its bound and names it `unresponsive`, the
routes that need it answer a JSON 503 naming it at once, the other worker's sessions go on, and once
it runs again its sessions finish with every event. A killed worker refuses nothing: its listeners
are kept by the front (addresses/listeners.py), so the browser's navigations during the restart wait
and are captured. A session whose journal cannot be resumed ends `lost` with the reason.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from playwright.sync_api import sync_playwright

from tests.site.harness import CHROMIUM, CHROMIUM_ARGS
from tests.support.serve_process import (
    NAVIGATED,
    Served,
    browse,
    finish,
    shop,
    start_serve,
    start_session,
    trace_urls,
)

__all__ = ["shop"]  # a fixture

pytestmark = pytest.mark.timeout(300)

PRODUCT = "/enamel-camp-mug.html"
HEALTH_BOUND = 10.0
"""`GET /health` answers within this, whatever the workers do."""
ROUTE_BOUND = 10.0
"""A route that needs a stalled worker answers within this (its 503 once the front knows)."""


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory, shop: str) -> Iterator[tuple[Served, Path]]:
    tmp = tmp_path_factory.mktemp("faults")
    served, _, _ = start_serve(tmp, shop, tmp / "state", "--workers", "2", "--output-dir", str(tmp / "out"))
    yield served, tmp / "out"
    print(served.stop()[-5000:])


def _worker(control: str, index: int) -> dict[str, Any]:
    worker: dict[str, Any] = requests.get(f"{control}/health", timeout=HEALTH_BOUND).json()["workers"][index]
    return worker


def _wait_state(control: str, index: int, state: str, patience: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + patience
    while (worker := _worker(control, index))["state"] != state:
        assert time.monotonic() < deadline, worker
        time.sleep(0.2)
    return worker


def test_a_stopped_worker_is_unresponsive_not_dead(fleet: tuple[Served, Path], shop: str) -> None:
    served, _ = fleet
    control = served.control
    names = ["stop-0", "stop-1"]
    started = {name: start_session(control, name) for name in names}
    victim = next(name for name in names if started[name]["worker"] == 1)
    other = next(name for name in names if name != victim)
    for name in names:
        browse(started[name]["proxy"], shop, f"/?by={name}")
    pid = _worker(control, 1)["pid"]
    os.kill(pid, signal.SIGSTOP)
    try:
        began = time.monotonic()
        health = requests.get(f"{control}/health", timeout=HEALTH_BOUND + 5).json()
        assert time.monotonic() - began < HEALTH_BOUND
        assert [w["state"] for w in health["workers"]] == ["up", "unresponsive"]
        deadline = time.monotonic() + 20  # until the front's own probes know it
        while True:
            began = time.monotonic()
            reply = requests.get(f"{control}/sessions/{victim}", timeout=ROUTE_BOUND + 40)
            assert time.monotonic() - began < ROUTE_BOUND + 1  # never past the bound, even before it knows
            if reply.status_code == 503:
                break
            assert reply.status_code == 504 or time.monotonic() < deadline, reply.text
        assert reply.json()["error"] == "worker_unresponsive" and reply.json()["worker"] == 1
        assert reply.headers["retry-after"]
        # The other worker's session goes on; the list still names the silent worker's session.
        browse(started[other]["proxy"], shop, PRODUCT)
        assert trace_urls(control, other) == [f"{shop}/?by={other}", f"{shop}{PRODUCT}"]
        began = time.monotonic()
        listed = {v["session"]: v for v in requests.get(f"{control}/sessions", timeout=30).json()["sessions"]}
        assert time.monotonic() - began < ROUTE_BOUND
        assert listed[victim]["worker"] == 1 and listed[victim]["worker_state"] == "unresponsive"
        assert all("worker" in view and "node" in view for view in listed.values()), listed
    finally:
        os.kill(pid, signal.SIGCONT)
    assert _wait_state(control, 1, "up", 20)["pid"] == pid  # the same process: nothing was restarted
    browse(started[victim]["proxy"], shop, PRODUCT)
    for name in names:
        assert trace_urls(control, name) == [f"{shop}/?by={name}", f"{shop}{PRODUCT}"]
        assert finish(control, name, NAVIGATED).json()["status"] == "success"


def test_a_worker_killed_under_chromium_refuses_nothing(fleet: tuple[Served, Path], shop: str) -> None:
    """A real Chromium on its session's bare address while its worker is SIGKILLed: every navigation
    succeeds and is in the trace; the worker's finished sessions are still listed after it restarted."""
    served, _ = fleet
    control = served.control
    done = start_session(control, "kept-verdict")  # finished before the kill: still listed after it
    while done["worker"] != 1:
        done = start_session(control, f"kept-verdict-{time.monotonic_ns()}")
    browse(done["proxy"], shop, PRODUCT)
    assert finish(control, done["session"], NAVIGATED).json()["status"] == "success"
    started = start_session(control, "chromium-kill")
    while started["worker"] != 1:
        started = start_session(control, f"chromium-kill-{time.monotonic_ns()}")
    name = started["session"]
    pages = ["/", "/?page=2", "/?page=3", PRODUCT]
    with sync_playwright() as playwright:
        args = [*CHROMIUM_ARGS, f"--proxy-server={started['proxy']}", "--proxy-bypass-list=<-loopback>"]
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=args)
        try:
            page = browser.new_page()
            page.set_default_timeout(60_000)
            assert page.goto(f"{shop}{pages[0]}").status == 200
            before = _worker(control, 1)
            os.kill(before["pid"], signal.SIGKILL)
            for path in pages[1:]:  # at once, while the worker is down and coming back
                response = page.goto(f"{shop}{path}")
                assert response is not None and response.status == 200, path
        finally:
            browser.close()
    after = _wait_state(control, 1, "up")
    assert after["pid"] != before["pid"] and after["restarts"] == before["restarts"] + 1
    events = requests.get(f"{control}/sessions/{name}/trace", timeout=10).json()["events"]
    navigations = [event["url"] for event in events if event.get("type") == "navigation"]
    assert navigations == [f"{shop}{path}" for path in pages], navigations
    assert finish(control, name, NAVIGATED).json()["status"] == "success"
    listed = {v["session"]: v for v in requests.get(f"{control}/sessions", timeout=30).json()["sessions"]}
    assert listed[done["session"]]["result"]["status"] == "success"
    view = requests.get(f"{control}/sessions/{done['session']}", timeout=10)
    assert view.status_code == 200 and view.json()["result"]["status"] == "success"


def test_a_resume_that_cannot_succeed_ends_lost_with_the_reason(
    fleet: tuple[Served, Path], shop: str
) -> None:
    served, _ = fleet
    control = served.control
    started = start_session(control, "unresumable")
    while started["worker"] != 1:
        started = start_session(control, f"unresumable-{time.monotonic_ns()}")
    name = started["session"]
    browse(started["proxy"], shop, f"/?by={name}")
    journal = Path(requests.get(f"{control}/sessions/{name}", timeout=10).json()["journal"])
    lines = journal.read_text().splitlines(keepends=True)
    with journal.open("a") as damaged:  # the disk garbled a line in the middle: no resume can read it
        damaged.write("{not json\n" + lines[-1])
    os.kill(_worker(control, 1)["pid"], signal.SIGKILL)
    deadline = time.monotonic() + 60
    while True:
        listed = {v["session"]: v for v in requests.get(f"{control}/sessions", timeout=30).json()["sessions"]}
        if listed.get(name, {}).get("state") == "lost":
            break
        assert time.monotonic() < deadline, listed.get(name)
        time.sleep(0.2)
    assert "refused to resume it" in listed[name]["reason"] and listed[name]["worker"] == 1
    refused = requests.get(f"{control}/sessions/{name}", timeout=10)
    assert refused.status_code == 410 and refused.json()["error"] == "session_lost"
    _wait_state(control, 1, "up")  # the worker itself is back for new sessions
    again = start_session(control, name)
    browse(again["proxy"], shop, PRODUCT)
    assert finish(control, name, NAVIGATED).json()["status"] == "success"
