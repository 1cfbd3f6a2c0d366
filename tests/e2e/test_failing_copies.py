"""A copy that fails is noticed, kept from new sessions, reset, and named in every verdict it touched.

Two replicas of a real counter site (`tests/support/counter_replicas.py`) with real reset endpoints,
`serve --isolation readers` (readers pack onto the least busy, lowest copy), six reading sessions one
after the other, each a browser-like navigation through its own proxy address and a finish. The copy the
first session leases fails before anyone sends a thing: it answers 500 to everything, or its site is
gone (connections refused: the proxy answers 502). With the site map's `health` defaults (of the last 10
judged answers, at least 2 and half of them failures) the pool calls it failing at its second failure:
at most two sessions land on it, nobody changed it yet it is reset (its endpoint called) and probed,
`/health` names it, every finish that ran on it carries `site_errors`, and the healthy copy takes the
rest. A reset that repairs it puts it back in service (probed at its `health_url`, a later session lands
on it); one that does not leaves it `out_of_service` with the reason, retried with a growing pause.
In one process, with `--workers 2` (the front gathers the workers' answers) and on two Ray nodes.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import requests
from playwright.sync_api import sync_playwright

from tests.site.harness import CHROMIUM, CHROMIUM_ARGS, ProxyProcess, start_proxy
from tests.support.counter_replicas import DEMO_TASKS, READ, Counter, counter_config, counters
from tests.support.serve_process import NAVIGATION

pytestmark = pytest.mark.timeout(300)

RETRIEVED: dict[str, Any] = {"task_type": "RETRIEVE", "status": "SUCCESS", "retrieved_data": [34.99]}
"""READ's final answer: the verdict does not matter here, the fields beside it do."""
SESSIONS = 6
PATIENCE = 60.0
"""Seconds a reset, a probe or a gathering may take to show on a loaded machine."""


# --- ways a copy fails ----------------------------------------------------------------------------------


def answer_500(replica: Counter) -> None:
    replica.site.broken = True


FAILURES: dict[str, tuple[Callable[[Counter], None], int]] = {
    "answers 500": (answer_500, 500),
    "refuses connections": (lambda replica: replica.site.stop(), 502),
}
"""How the copy fails, and what its sessions' navigations get through the proxy."""


# --- serve and its sessions -------------------------------------------------------------------------------


def serve(workdir: Path, config: Path, *more: str, timeout: float = 30) -> ProxyProcess:
    return start_proxy(
        workdir, tasks=DEMO_TASKS, config=config, timeout=timeout,
        extra_args=["--isolation", "readers", *more],
    )  # fmt: skip


def health(proxy: ProxyProcess) -> dict[str, Any]:
    return dict(requests.get(f"{proxy.control_url}/health", timeout=30).json())


def copy_view(proxy: ProxyProcess, index: int) -> dict[str, Any]:
    """What `/health`'s pool says of replica `index`."""
    return dict(health(proxy)["pool"]["sites"]["__SHOPPING__"]["replicas"][index])


def wait_until(what: str, check: Callable[[], Any]) -> Any:
    deadline = time.monotonic() + PATIENCE
    while not (found := check()):
        assert time.monotonic() < deadline, f"{what}: not within {PATIENCE:g} s"
        time.sleep(0.2)
    return found


@dataclass
class Session:
    name: str
    replica: int
    """The index of the copy its lease names (`replicas` of `POST /sessions`)."""
    status: int
    """What its navigation got through its own address."""
    finish: dict[str, Any]
    node: str | None = None


@dataclass
class Run:
    sessions: list[Session] = field(default_factory=list)
    broken: int = -1
    """The index of the copy that fails."""
    views: list[dict[str, Any]] = field(default_factory=list)
    """`/health`'s view of the failing copy after each session's finish."""

    def on(self, index: int) -> list[Session]:
        return [s for s in self.sessions if s.replica == index]


def one_session(
    proxy: ProxyProcess, replicas: list[Counter], name: str, near: str | None = None
) -> tuple[dict[str, Any], int]:
    body: dict[str, Any] = {"task_id": READ, "session": name, "wait": PATIENCE}
    if near is not None:
        body["near"] = near
    reply = requests.post(f"{proxy.control_url}/sessions", json=body, timeout=PATIENCE + 30)
    assert reply.status_code == 200, reply.text
    started: dict[str, Any] = reply.json()
    url = started["replicas"]["__SHOPPING__"]
    return started, [r.url for r in replicas].index(url)


def navigate_and_finish(proxy: ProxyProcess, started: dict[str, Any], replica: Counter) -> tuple[int, dict]:
    page = requests.get(f"{replica.url}/", proxies={"http": started["proxy"]}, headers=NAVIGATION, timeout=30)
    name = started["session"]
    finish = requests.post(f"{proxy.control_url}/sessions/{name}/finish", json=RETRIEVED, timeout=PATIENCE)
    assert finish.status_code == 200, finish.text
    return page.status_code, finish.json()


def six_readers(
    proxy: ProxyProcess,
    replicas: list[Counter],
    fail: Callable[[Counter], None],
    *,
    nodes: list[str] | None = None,
    between: Callable[[Run], None] | None = None,
) -> Run:
    """Six readers one after the other; the copy the first one leases fails before it navigates.
    `nodes`: the sessions ask for a worker near each in turn. `between`: run after each finish."""
    run = Run()
    for number in range(SESSIONS):
        near = nodes[number % len(nodes)] if nodes else None
        started, index = one_session(proxy, replicas, f"reader{number}", near)
        if number == 0:
            run.broken = index
            fail(replicas[index])
        status, finish = navigate_and_finish(proxy, started, replicas[index])
        run.sessions.append(Session(started["session"], index, status, finish, started.get("node")))
        run.views.append(copy_view(proxy, run.broken))
        if between is not None:
            between(run)
    return run


@contextmanager
def pool_notices(proxy: ProxyProcess) -> Iterator[list[dict[str, Any]]]:
    """The `pool` notices of `GET /events` (every session's), as they come, while the block runs."""
    notices: list[dict[str, Any]] = []
    reply = requests.get(f"{proxy.control_url}/events", stream=True, timeout=(10, None))
    assert reply.status_code == 200, reply.text

    def read() -> None:
        kind = ""
        try:
            for raw in reply.iter_lines():
                line = raw.decode()
                if line.startswith("event:"):
                    kind = line.partition(":")[2].strip()
                elif line.startswith("data:") and kind == "pool":
                    notices.append(json.loads(line.partition(":")[2]))
        except (requests.RequestException, AttributeError, ValueError):
            pass  # closed at the end of the block

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        yield notices
    finally:
        time.sleep(0.5)  # the last notices on their way
        reply.close()


@contextmanager
def two_counters(tmp_path: Path, *, health_url: str | None = None) -> Iterator[tuple[list[Counter], Path]]:
    with counters(2) as replicas:
        yield replicas, counter_config(tmp_path / "sites.json", replicas, health_url=health_url)


# --- what every failing copy must show ------------------------------------------------------------------


def check_taken_out(proxy: ProxyProcess, replicas: list[Counter], run: Run, answered: int) -> dict[str, Any]:
    """At most two sessions on the failing copy, each finish that ran there carrying `site_errors`, the
    healthy copy serving the rest; the failing copy reset though nobody changed it, named by `/health`
    as failing or out of service while it fails. `/health`'s view of it once out of service."""
    broken, healthy = replicas[run.broken], replicas[1 - run.broken]
    on_broken, on_healthy = run.on(run.broken), run.on(1 - run.broken)
    assert 1 <= len(on_broken) <= 2, [(s.name, s.replica) for s in run.sessions]
    assert on_broken == run.sessions[: len(on_broken)]  # the first ones, before it was known failing
    assert len(on_healthy) == SESSIONS - len(on_broken)
    for session in on_broken:
        errors = session.finish.get("site_errors") or {}
        assert session.status == answered, (session.name, session.status)
        assert errors.get("count", 0) > 0 and errors["origins"] == {broken.url: errors["count"]}, (
            session.finish
        )
        first = errors["first"][0]
        assert first["method"] == "GET" and first["url"].startswith(broken.url), errors
    for session in on_healthy:
        assert session.status == 200, (session.name, session.status)
        assert session.finish.get("site_errors", {}).get("count") == 0, session.finish
        assert session.finish.get("sites_answered") is True, session.finish
    # once it was taken out, /health named it (failing, resetting between, or out of service)
    named = [v for v in run.views[len(on_broken) - 1 :] if v["state"] != "free"]
    assert named, run.views
    assert all(v["state"] in {"failing", "resetting", "out_of_service"} for v in named), run.views
    view: dict[str, Any] = wait_until(
        "the failing copy out of service",
        lambda: (v := copy_view(proxy, run.broken))["state"] == "out_of_service" and v,
    )
    assert view["health"]["failures"] >= 2 and view["reason"], view
    assert view["resets"] and all(r["why"].startswith("failing: ") for r in view["resets"]), view
    assert broken.reset.calls >= 1 and broken.site.posts == 0  # reset, though nobody changed it
    assert healthy.reset.calls == 0 and healthy.site.posts == 0
    assert copy_view(proxy, 1 - run.broken)["state"] == "free"
    log = proxy.log_file.read_text(errors="replace") if proxy.log_file.exists() else ""
    assert "is failing" in log and "out of service" in log, log[-3000:]
    shown = dashboard_line(proxy, run.broken, "out_of_service")
    assert f"__SHOPPING__ {run.broken} out of service" in shown["text"], shown
    assert "failing: 2 of its last 2 judged answers failed" in shown["text"], shown
    assert view["reason"] in shown["title"], shown
    return view


def dashboard_line(proxy: ProxyProcess, index: int, state: str) -> dict[str, str]:
    """What the dashboard's pool strip (in headless Chromium) shows of replica `index` once it shows it
    in `state` (redrawn every few seconds: a retry's reset, before its probe, shows `resetting`): its
    text and its tooltip."""
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.goto(f"{proxy.control_url}/")
            line = page.locator("#pool li[data-site='__SHOPPING__']").nth(index)
            line.and_(page.locator(f"[data-state='{state}']")).wait_for(timeout=PATIENCE * 1000)
            return {"text": line.inner_text(), "title": line.get_attribute("title") or ""}
        finally:
            browser.close()


# --- the tests ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("how", list(FAILURES))
def test_a_failing_copy_takes_at_most_two_sessions_and_is_reset(tmp_path: Path, how: str) -> None:
    """In one process: a copy that answers 500 to everything, or whose site is gone."""
    fail, answered = FAILURES[how]
    with two_counters(tmp_path) as (replicas, config):
        proxy = serve(tmp_path / "serve", config)
        try:
            with pool_notices(proxy) as notices:
                run = six_readers(proxy, replicas, fail)
                view = check_taken_out(proxy, replicas, run, answered)
        finally:
            proxy.stop()
    expected = "HTTP 500" if how == "answers 500" else "ConnectError"
    assert expected in view["reason"], view
    # its holder at its second failure was told, on the event stream, that the copy it holds is failing
    told = [n for n in notices if n.get("state") == "failing" and n.get("index") == run.broken]
    assert told and told[0].get("session") == run.sessions[1].name and told[0]["failing"], notices


@pytest.mark.parametrize("mode", ["two workers", "ray"])
def test_a_copy_answering_500_under_a_fleet(tmp_path: Path, mode: str) -> None:
    """`--workers 2` (local), and `--workers 2 --ray` on two Ray nodes on 127.0.0.1 with the sessions
    asking for a worker near each node in turn: the front gathers the failures each worker saw."""
    with contextlib.ExitStack() as stack:
        replicas, config = stack.enter_context(two_counters(tmp_path))
        more: tuple[str, ...] = ("--workers", "2")
        if mode == "ray":
            more = (*more, "--ray", stack.enter_context(ray_cluster()))
        proxy = serve(tmp_path / "serve", config, *more, timeout=180)
        stack.callback(proxy.stop)
        nodes = sorted({w["node"] for w in health(proxy)["workers"]}) if mode == "ray" else None
        run = six_readers(proxy, replicas, answer_500, nodes=nodes)
        check_taken_out(proxy, replicas, run, 500)
    if mode == "ray":
        assert nodes is not None and len(nodes) == 2
        assert {s.node for s in run.sessions[:2]} == set(nodes)  # its failures seen on both nodes


@pytest.mark.parametrize("mode", ["one process", "two workers"])
@pytest.mark.parametrize("how", list(FAILURES))
def test_a_copy_its_reset_repairs_serves_again(tmp_path: Path, how: str, mode: str) -> None:
    """The reset endpoint repairs it (a restarted container): its `health_url` answers 2xx, it is
    `free` again, and the next session lands on it and is served; with `--workers 2` the front's pool
    does the same on the failures its workers saw."""
    fail, answered = FAILURES[how]

    def back_before_the_next(run: Run) -> None:
        if len(run.sessions) == 2:  # its second failure: failing, reset, probed, back
            wait_until("the repaired copy free", lambda: copy_view(proxy, run.broken)["state"] == "free")

    with two_counters(tmp_path, health_url="/healthz") as (replicas, config):
        for replica in replicas:
            replica.repairs_on_reset(True)
        proxy = serve(tmp_path / "serve", config, *(("--workers", "2") if mode == "two workers" else ()))
        try:
            run = six_readers(proxy, replicas, fail, between=back_before_the_next)
            view = copy_view(proxy, run.broken)
        finally:
            proxy.stop()
        broken = replicas[run.broken]
        assert broken.reset.done == 1 and broken.site.posts == 0 and replicas[1 - run.broken].reset.calls == 0
    first, later = run.sessions[:2], run.sessions[2:]
    assert [s.replica for s in first] == [run.broken] * 2 and [s.status for s in first] == [answered] * 2
    assert all(s.finish["site_errors"]["count"] > 0 for s in first), [s.finish for s in first]
    assert later[0].replica == run.broken, [(s.name, s.replica) for s in run.sessions]  # it serves again
    assert all(s.status == 200 and s.finish["site_errors"]["count"] == 0 for s in later), later
    assert run.views[1]["state"] in {"failing", "resetting", "free"}, run.views  # taken out, then back
    assert view["state"] in {"free", "leased"} and "failing" not in view and "reason" not in view, view
    assert [(r["ok"], r["why"].startswith("failing: ")) for r in view["resets"]] == [(True, True)], view
    assert view["health"]["failures"] == 2 and view["health"]["recent_failures"] == 0, view


def test_a_copy_its_reset_does_not_repair_stays_out_of_service(tmp_path: Path) -> None:
    """The reset succeeds but the copy still answers 500: out of service with the reason, retried with
    a growing pause (each retry resets and probes again), and the other copy takes every later session."""
    called: list[float] = []
    with two_counters(tmp_path) as (replicas, config):
        for replica in replicas:
            replica.repairs_on_reset(False)
            replica.reset.on_reset = timed(replica.reset.on_reset, called)
        proxy = serve(tmp_path / "serve", config)
        try:
            run = six_readers(proxy, replicas, answer_500)
            view = check_taken_out(proxy, replicas, run, 500)
            wait_until("three resets of the failing copy", lambda: len(called) >= 3)
            # between a retry's reset and its probe it shows `resetting`; then out of service again
            again = wait_until(
                "out of service after the third reset",
                lambda: (v := copy_view(proxy, run.broken))["state"] == "out_of_service" and v,
            )
        finally:
            proxy.stop()
    assert len(run.on(run.broken)) == 2  # the defaults: failing at the second failure
    assert "HTTP 500" in view["reason"] and again["state"] == "out_of_service", again
    assert replicas[run.broken].site.broken  # nothing repaired it
    pauses = [b - a for a, b in itertools.pairwise(called)]
    assert pauses[1] > 1.5 * pauses[0], pauses  # the pause grows (doubling)
    assert len(again["resets"]) >= 3 and all(r["ok"] for r in again["resets"]), again


def test_a_copy_failing_when_serve_is_killed_is_probed_before_its_next_lease(tmp_path: Path) -> None:
    """SIGKILL while the failing copy is out of service; the next `serve` on the same output directory
    remembers it failing: it resets and probes it before any lease, and it stays out while it fails."""
    with two_counters(tmp_path) as (replicas, config):
        first = serve(tmp_path / "serve", config)
        try:
            run = six_readers(first, replicas, answer_500)
            check_taken_out(first, replicas, run, 500)
            assert first.process is not None
            first.process.send_signal(signal.SIGKILL)
            first.process.wait(timeout=60)
        finally:
            first.stop()
        broken = replicas[run.broken]
        calls = broken.reset.calls
        second = serve(tmp_path / "serve", config)
        try:
            started, index = one_session(second, replicas, "after-restart")
            status, finish = navigate_and_finish(second, started, replicas[index])
            view = wait_until(
                "out of service after the restart",
                lambda: (v := copy_view(second, run.broken))["state"] == "out_of_service" and v,
            )
        finally:
            second.stop()
    assert index == 1 - run.broken and status == 200 and finish["site_errors"]["count"] == 0, finish
    assert broken.reset.calls > calls and "HTTP 500" in view["reason"], view
    assert view["resets"][0]["why"].startswith("failing before a restart"), view


def timed(on_reset: Callable[[], None], called: list[float]) -> Callable[[], None]:
    """`on_reset`, noting when each reset ran."""

    def reset() -> None:
        called.append(time.monotonic())
        on_reset()

    return reset


@contextmanager
def ray_cluster() -> Iterator[str]:
    """A head and a second node, each a raylet of its own on 127.0.0.1 (as in
    `tests/e2e/test_replica_pools.py`)."""
    from ray.cluster_utils import Cluster  # the ray extra is part of the test install

    node: dict[str, Any] = {"node_ip_address": "127.0.0.1", "num_cpus": 2}
    cluster = Cluster(initialize_head=True, head_node_args={**node, "include_dashboard": False})
    try:
        cluster.add_node(**node)
        cluster.wait_for_nodes()
        yield cluster.address
    finally:
        cluster.shutdown()
