"""The parts of `tests/e2e/test_failing_copies.py`: two counter replicas, one of which fails (answers 500 to
everything, or is gone), a `serve` in front of them, six reading sessions through their own addresses,
and what each of them and the pool said (`check_taken_out`); a two-node Ray cluster on 127.0.0.1."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests
from playwright.sync_api import sync_playwright

from tests.site.harness import CHROMIUM, CHROMIUM_ARGS, ProxyProcess, start_proxy
from tests.support.counter_replicas import DEMO_TASKS, READ, Counter, counter_config, counters
from tests.support.serve_process import NAVIGATION, PATIENCE, wait_until

RETRIEVED: dict[str, Any] = {"task_type": "RETRIEVE", "status": "SUCCESS", "retrieved_data": [34.99]}
"""READ's final answer: the verdict does not matter here, the fields beside it do."""
SESSIONS = 6


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
    # the first ones, before it was known failing
    assert on_broken == run.sessions[: len(on_broken)], on_broken
    assert len(on_healthy) == SESSIONS - len(on_broken), (on_healthy, on_broken)
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
    # reset, though nobody changed it
    assert broken.reset.calls >= 1 and broken.site.posts == 0, (broken.reset.calls, broken.site.posts)
    assert healthy.reset.calls == 0 and healthy.site.posts == 0, (healthy.reset.calls, healthy.site.posts)
    assert (healthy_view := copy_view(proxy, 1 - run.broken))["state"] == "free", healthy_view
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


# --- resets timed, and a Ray cluster ---------------------------------------------------------------------


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
