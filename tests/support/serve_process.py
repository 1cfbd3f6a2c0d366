"""A real `webarena-live serve` for tests: a subprocess on free ports in front of the demo shop."""

from __future__ import annotations

import contextlib
import json
import random
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.site.harness import finish_with_preview
from webarena_live.demo import site as demo_site
from webarena_live.launch import ServeProcess

NAVIGATION = {
    "Accept": "text/html,application/xhtml+xml",
    "Sec-Fetch-Dest": "document",
    "Sec-Fetch-Mode": "navigate",
    "Sec-Fetch-User": "?1",
    "Sec-Fetch-Site": "none",
}
"""Request headers of a browser's navigation (what the evaluator counts as one), for HTTP clients."""
NAVIGATED = {"task_type": "NAVIGATE", "status": "SUCCESS", "retrieved_data": None}
"""A navigate task's final answer."""
PATIENCE = 60.0
"""Seconds a reset, a probe, a lease's end or a gathering may take to show on a loaded machine."""


def wait_until(what: str, check: Callable[[], Any]) -> Any:
    """`check()`'s first true answer, asked every 0.2 s; fails naming `what` after `PATIENCE` seconds."""
    deadline = time.monotonic() + PATIENCE
    while not (found := check()):
        assert time.monotonic() < deadline, f"{what}: not within {PATIENCE:g} s"
        time.sleep(0.2)
    return found


@pytest.fixture(scope="module")
def shop() -> Iterator[str]:
    server = demo_site.serve("127.0.0.1", 0)
    yield server.url
    server.shutdown()


class Served(ServeProcess):
    """A running `webarena-live serve` for a test."""

    @property
    def control(self) -> str:
        """The control API's base URL."""
        return self.control_url

    @property
    def proxy_port(self) -> int:
        return self.ports.proxy

    def stop(self, *, timeout: float = 30) -> str:  # type: ignore[override]
        """Ctrl-C, as a person stops it; what it printed."""
        super().stop(timeout=timeout)
        return self.log_tail(1_000_000)


def launch_serve(cwd: Path, *args: str, env: dict[str, str] | None = None) -> Served:
    """`webarena-live serve ARGS` in `cwd` on free ports, once /health answers (`args` name no ports)."""
    served = Served(*args, cwd=cwd, env=env)
    served.start()
    return served


def start_serve(tmp_path: Path, shop: str, state: Path, *extra: str) -> tuple[Served, str, str]:
    """The demo tasks with the demo shop mapped, journals under `state`: (served, control, proxy URL);
    `served.stop()` stops it and answers what it printed."""
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"environments": {"__SHOPPING__": {"urls": [shop]}}}))
    served = launch_serve(
        tmp_path, "--config", str(config), "--set", f"confdir={tmp_path / 'conf'}", *extra,
        env={"XDG_STATE_HOME": str(state)},
    )  # fmt: skip
    return served, served.control, served.proxy_url


def free_range(count: int) -> int:
    """The first of `count` consecutive free ports below Linux's ephemeral range (32768-60999), where
    the ports the operating system hands out (the proxy's own, other tests') never land."""
    start = random.randrange(20_000, 32_000 - count)
    for low in range(start, start + 500):
        try:
            with contextlib.ExitStack() as held:
                for port in range(low, low + count):
                    held.enter_context(socket.socket()).bind(("127.0.0.1", port))
            return low
        except OSError:
            continue
    raise AssertionError(f"no {count} consecutive free ports from {start}")


def serve_on_one_address(tmp_path: Path, shop: str, *extra: str) -> tuple[Served, str, int]:
    """`start_serve` with one session address (`--session-ports P-P`, P free): every start gets it, the
    next start after a finish takes it over (and the connections kept open on it): (served, control, P)."""
    port = free_range(1)
    served, control, _ = start_serve(
        tmp_path, shop, tmp_path / "state", "--session-ports", f"{port}-{port}", *extra
    )
    return served, control, port


def finish(
    control: str, session: str, answer: Any, *, timeout: float = 30, **kwargs: Any
) -> requests.Response:
    """`POST {control}/sessions/{session}/finish`, preceded by a preview with the same body that must say
    what the finish then did (`harness.check_preview`), as every finish through the live harness is."""
    return finish_with_preview(requests, f"{control}/sessions/{session}", answer, timeout=timeout, **kwargs)


def start_session(control: str, session: str, task_id: int = 1003, **extra: Any) -> dict[str, Any]:
    """`POST /sessions` for `session`, its outputs in the run of its name: the answer (a 200)."""
    body = {"task_id": task_id, "session": session, "run": session, **extra}
    reply = requests.post(f"{control}/sessions", json=body, timeout=30)
    assert reply.status_code == 200, reply.text
    answer: dict[str, Any] = reply.json()
    return answer


def browse(proxy: str, site: str, path: str, *, patience: float = 90) -> None:
    """One navigation through `proxy`; retried while the address is not back (its worker restarting).

    While a local worker restarts, its kept listener accepts the connection and the next worker
    answers it (`addresses/listeners.py`), so the reply may wait for a whole restart: the read waits
    as long as the patience left. A read that timed out is never sent again, since the next worker
    may still serve it and a second copy would be a second event.
    """
    deadline = time.monotonic() + patience
    while True:
        left = max(10.0, deadline - time.monotonic())
        try:
            reply = requests.get(
                f"{site}{path}", proxies={"http": proxy}, headers=NAVIGATION, timeout=(10, left)
            )
            assert reply.status_code == 200
            return
        except requests.ConnectionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def trace_urls(control: str, session: str) -> list[str]:
    """The URLs of the session's events so far."""
    events = requests.get(f"{control}/sessions/{session}/trace", timeout=10).json()["events"]
    return [event["url"] for event in events]


def run_chromium_agent(control: str, task_id: int, **extra: Any) -> dict[str, Any]:
    """The demo's scripted agent for `task_id` in a Chromium of its own, launched with its session's bare
    address (nothing else names the session; `--proxy-bypass-list=<-loopback>` since Chromium never
    proxies loopback sites otherwise): the session, its task, worker and node, and the agent's answer."""
    from playwright.sync_api import sync_playwright

    from tests.site.harness import CHROMIUM, CHROMIUM_ARGS
    from webarena_live.demo.agent import ATTEMPTS

    session = f"chromium-{task_id}"
    started = start_session(control, session, task_id, **extra)
    with sync_playwright() as playwright:
        args = [*CHROMIUM_ARGS, f"--proxy-server={started['proxy']}", "--proxy-bypass-list=<-loopback>"]
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=args)
        try:
            page = browser.new_page()
            page.set_default_timeout(20_000)
            attempt = next(a for a in ATTEMPTS if a.task_id == task_id)
            answer = attempt.act(page, started["start_urls"][0])
        finally:
            browser.close()
    return {"session": session, "task_id": task_id, "worker": started.get("worker"),
            "node": started.get("node"), "answer": answer}  # fmt: skip
