"""`webarena-live serve --workers 2` for real: sessions placed on both workers, each reached at its
own proxy address with no credentials, one output directory, and a worker killed mid-run.

HTTP clients and real Chromium browsers launched with a bare `--proxy-server` (plus
`--proxy-bypass-list=<-loopback>`: Chromium never proxies loopback sites otherwise) drive the demo
shop; every verdict must be the planned one, no session's events may show up in another's trace
or HAR, and a worker killed with SIGKILL must come back with its sessions resumed from their
journals, at the same addresses, every event kept.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
import requests
from httpx_sse import EventSource
from playwright.sync_api import sync_playwright

from tests.site.harness import CHROMIUM, CHROMIUM_ARGS
from tests.support.serve_process import (
    NAVIGATED,
    NAVIGATION,
    Served,
    browse,
    finish,
    run_chromium_agent,
    shop,
    start_serve,
    start_session,
    trace_urls,
)
from webarena_live.launch import serve_command

__all__ = ["shop"]  # a fixture

pytestmark = pytest.mark.timeout(300)

PRODUCT = "/enamel-camp-mug.html"
"""Task 1003's page: a navigation ending here succeeds."""
CHROMIUM_TASKS = {1001: "success", 1003: "success", 1004: "success", 1007: "failure"}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory, shop: str) -> Iterator[tuple[Served, Path]]:
    tmp = tmp_path_factory.mktemp("workers")
    served, _, _ = start_serve(tmp, shop, tmp / "state", "--workers", "2", "--output-dir", str(tmp / "out"))
    yield served, tmp / "out"
    print(served.stop()[-3000:])


def test_sixteen_sessions_on_two_workers(fleet: tuple[Served, Path], shop: str) -> None:
    served, out = fleet
    control = served.control
    health = requests.get(f"{control}/health", timeout=10).json()
    assert [w["state"] for w in health["workers"]] == ["up", "up"]
    assert len({w["pid"] for w in health["workers"]} | {served.pid}) == 3

    names = [f"http-{i}" for i in range(12)]
    started = {name: start_session(control, name) for name in names}
    assert {s["worker"] for s in started.values()} == {0, 1}
    assert len({s["proxy"] for s in started.values()}) == 12
    # Even sessions end on the product page (success), odd ones one page short (failure); the home
    # page's query names the session, so an event in the wrong trace would show.
    plans = {
        name: ([f"/?by={name}", PRODUCT] if i % 2 == 0 else [PRODUCT, f"/?by={name}"])
        for i, name in enumerate(names)
    }
    with ThreadPoolExecutor(max_workers=6) as pool:
        list(pool.map(lambda n: [browse(started[n]["proxy"], shop, p) for p in plans[n]], names))
    chromium = [run_chromium_agent(control, task_id) for task_id in CHROMIUM_TASKS]
    assert {run["worker"] for run in chromium} == {0, 1}

    health = requests.get(f"{control}/health", timeout=10).json()
    assert [w["running"] for w in health["workers"]] == [8, 8]
    listed = {
        view["session"]: view for view in requests.get(f"{control}/sessions", timeout=10).json()["sessions"]
    }
    for name in names:
        assert trace_urls(control, name) == [f"{shop}{path}" for path in plans[name]]
        assert listed[name]["worker"] == started[name]["worker"]

    for i, name in enumerate(names):
        verdict = finish(control, name, NAVIGATED).json()
        assert verdict["status"] == ("success" if i % 2 == 0 else "failure"), (name, verdict)
    for run in chromium:
        verdict = finish(control, run["session"], run["answer"]).json()
        assert verdict["status"] == CHROMIUM_TASKS[verdict["task_id"]], (run["session"], verdict)

    # Through the front, a finish answers for its own answer: the same one again, the same verdict
    # (nothing carried or released twice); another one refused with both named, nothing changed.
    first = requests.post(f"{control}/sessions/{names[0]}/finish", json=NAVIGATED, timeout=30)
    assert first.headers.get("X-WebArena-Live-Repeated") == "true" and first.json()["status"] == "success"
    other = {**NAVIGATED, "status": "FAILURE"}
    refused = requests.post(f"{control}/sessions/{names[0]}/finish", json=other, timeout=30)
    assert (refused.status_code, refused.json()["error"]) == (409, "different_answer"), refused.text
    assert refused.json()["detail"]["judged"] == NAVIGATED and refused.json()["detail"]["refused"] == other

    # One output directory, the reference's layout (OUT/<run>/<task_id>/), each HAR its own session's.
    for name in names:
        har = json.loads((out / name / "1003" / "network.har").read_text())
        urls = [entry["request"]["url"] for entry in har["log"]["entries"]]
        assert urls == [f"{shop}{path}" for path in plans[name]]
    for run in chromium:
        task_dir = (
            out / run["session"] / str(next(t for t in CHROMIUM_TASKS if run["session"].endswith(str(t))))
        )
        assert sorted(p.name for p in task_dir.iterdir()) == [
            "agent_response.json",
            "attempt.json",
            "eval_result.json",
            "network.har",
        ]
        entries = json.loads((task_dir / "network.har").read_text())["log"]["entries"]
        assert entries and not any("by=http-" in e["request"]["url"] for e in entries)
    # The finished sessions' addresses are released.
    health = requests.get(f"{control}/health", timeout=10).json()
    assert [w["running"] for w in health["workers"]] == [0, 0]


def test_the_shared_ports_reach_the_owning_worker(fleet: tuple[Served, Path], shop: str) -> None:
    """`--port` and `--session-port` keep their meaning: credentials name the session, whichever worker
    holds it; the session port asks for them (407); no credentials on the proxy port: `default`."""
    served, _ = fleet
    control = served.control
    names = ["cred-0", "cred-1"]
    started = {name: start_session(control, name) for name in names}
    assert {started[name]["worker"] for name in names} == {0, 1}
    for name in names:
        via = served.session_proxy_url.replace("http://", f"http://{name}:x@")
        requests.get(f"{shop}/?by={name}", proxies={"http": via}, headers=NAVIGATION, timeout=10)
        assert trace_urls(control, name) == [f"{shop}/?by={name}"]
    asked = requests.get(f"{shop}/", proxies={"http": served.session_proxy_url}, timeout=10)
    assert asked.status_code == 407 and "Basic" in asked.headers["proxy-authenticate"]
    requests.get(f"{shop}/?by=nobody", proxies={"http": served.proxy_url}, headers=NAVIGATION, timeout=10)
    assert trace_urls(control, "default")[-1] == f"{shop}/?by=nobody"
    for name in names:
        assert finish(control, name, NAVIGATED).json()["status"] == "failure"  # the home page, not the mug


def test_a_startup_mistake_is_told_once_and_nothing_runs(tmp_path: Path) -> None:
    run = subprocess.run(
        [*serve_command(), "--workers", "2", "--tasks", str(tmp_path / "nope.json"), "--port", "0",
         "--session-port", "0", "--control-port", "0"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    output = run.stdout + run.stderr
    assert run.returncode == 2, output
    assert output.count("nope.json") == 1, output
    assert "a worker did not start (exit code 2" in run.stderr


def test_every_workers_sessions_in_one_event_stream(fleet: tuple[Served, Path], shop: str) -> None:
    """`GET /events` on the front: one `sessions` opening with every worker's sessions, then each
    worker's notices as they happen (what the dashboard reads)."""
    served, _ = fleet
    control = served.control
    names = ["stream-0", "stream-1"]
    started = {name: start_session(control, name) for name in names}
    with httpx.Client(timeout=30) as client, client.stream("GET", f"{control}/events") as stream:
        notices = (sse for sse in EventSource(stream).iter_sse() if sse.data)  # as a browser: no empty ones
        opening = next(notices)
        assert opening.event == "sessions"
        listed = {view["session"]: view["worker"] for view in json.loads(opening.data)["sessions"]}
        assert {listed[name] for name in names} == {0, 1}
        for name in names:
            browse(started[name]["proxy"], shop, f"/?by={name}")
        seen: set[str] = set()
        for notice in notices:
            if notice.event == "event":
                seen.add(json.loads(notice.data)["session"])
            if seen >= set(names):
                break
    for name in names:
        finish(control, name, NAVIGATED)


def test_the_dashboard_shows_every_workers_sessions(
    fleet: tuple[Served, Path], shop: str, tmp_path: Path
) -> None:
    """The front serves the dashboard: a real Chromium lists the sessions of both workers and follows
    one of them live, with no console error."""
    served, _ = fleet
    control = served.control
    names = ["dash-0", "dash-1"]
    started = {name: start_session(control, name) for name in names}
    assert {started[name]["worker"] for name in names} == {0, 1}
    problems: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=list(CHROMIUM_ARGS))
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda error: problems.append(str(error)))
            page.goto(f"{control}/#{names[1]}")
            for name in names:
                page.wait_for_selector(f'#sessions tbody tr[data-session="{name}"]', timeout=10_000)
            page.wait_for_selector("#live.on", timeout=10_000)
            browse(started[names[1]]["proxy"], shop, f"/?by={names[1]}")
            page.wait_for_selector('#events tbody tr[data-index="0"]', timeout=10_000)
            page.screenshot(path=str(tmp_path / "dashboard-workers.png"))
        finally:
            browser.close()
    assert not problems, problems
    for name in names:
        finish(control, name, NAVIGATED)


def test_a_killed_worker_comes_back_with_its_sessions(fleet: tuple[Served, Path], shop: str) -> None:
    served, out = fleet
    control = served.control
    names = [f"kill-{i}" for i in range(8)]
    started = {name: start_session(control, name) for name in names}
    victim = 1
    on_victim = [name for name in names if started[name]["worker"] == victim]
    assert len(on_victim) == 4
    for name in names:
        browse(started[name]["proxy"], shop, f"/?by={name}")
    before = requests.get(f"{control}/health", timeout=10).json()["workers"][victim]
    os.kill(before["pid"], signal.SIGKILL)

    # While it is down its sessions answer a clear JSON 503 (never a hang or a 500); the others work.
    seen_down = False
    for _ in range(50):
        reply = requests.get(f"{control}/sessions/{on_victim[0]}", timeout=10)
        if reply.status_code == 503:
            assert reply.json()["error"] == "worker_unavailable" and reply.headers["retry-after"]
            seen_down = True
            break
        time.sleep(0.02)
    assert seen_down
    other = next(name for name in names if started[name]["worker"] != victim)
    assert requests.get(f"{control}/sessions/{other}", timeout=10).status_code == 200

    # The agents carry on at their addresses (retrying while the worker comes back).
    for name in names:
        browse(started[name]["proxy"], shop, PRODUCT)
    deadline = time.monotonic() + 60  # back once every session of it is resumed
    while (after := requests.get(f"{control}/health", timeout=10).json()["workers"][victim])["state"] != "up":
        assert time.monotonic() < deadline, after
        time.sleep(0.1)
    assert after["pid"] != before["pid"] and after["restarts"] == before["restarts"] + 1
    assert after["proxy_port"] == before["proxy_port"]
    for name in names:
        assert trace_urls(control, name) == [f"{shop}/?by={name}", f"{shop}{PRODUCT}"], name
        assert finish(control, name, NAVIGATED).json()["status"] == "success"
        har = json.loads((out / name / "1003" / "network.har").read_text())
        assert len(har["log"]["entries"]) == 2
