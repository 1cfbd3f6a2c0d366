"""`serve --ray` across machines made of network namespaces (`tests/support/netns.py`): the front's
control API called from inside the front's namespace, every call timed; agents that remember every
request they sent; the processes of a worker.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests
from requests.adapters import HTTPAdapter

from tests.support.netns import Namespaces
from tests.support.serve_process import NAVIGATION

FRONT, NODE, AGENT = "10.234.1.1", "10.234.1.2", "10.234.1.3"
"""The front's machine, the other node, and an agent's own address on the other node's machine."""
NETWORK = "10.234.1.0/24"
RAY_PORT = 6379
FAST_HEALTH_CHECKS = {
    "health_check_initial_delay_ms": 0,
    "health_check_period_ms": 500,
    "health_check_timeout_ms": 8000,
    "health_check_failure_threshold": 3,
}
"""A node whose raylet is killed is refused at once three times: dead within seconds. A node cut off
answers nothing: each check waits its 8 s, so Ray calls it dead only after about 25 s."""


@dataclass
class Control:
    """The front's control API (on loopback of the front's namespace), every call timed."""

    spaces: Namespaces
    url: str
    calls: list[tuple[str, float, int]] = field(default_factory=list)
    """(method and path, seconds, status) of each call."""

    def request(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        def call() -> requests.Response:
            with requests.Session() as session:
                session.trust_env = False
                return session.request(method, f"{self.url}{path}", timeout=60, **kwargs)

        began = time.monotonic()
        reply = self.spaces.run("front", call)
        self.calls.append((f"{method} {path}", time.monotonic() - began, reply.status_code))
        return reply

    def health(self) -> dict[str, Any]:
        reply = self.request("GET", "/health")
        assert reply.status_code == 200, reply.text
        answer: dict[str, Any] = reply.json()
        return answer

    def state_of(self, index: int) -> str:
        state: str = self.health()["workers"][index]["state"]
        return state

    def until(self, what: Callable[[], bool], patience: float, poll: float = 0.3) -> float:
        """Seconds until `what()` held; AssertionError past `patience`."""
        began = time.monotonic()
        while not what():
            assert time.monotonic() - began < patience, f"not within {patience}s"
            time.sleep(poll)
        return time.monotonic() - began

    def sessions(self) -> dict[str, dict[str, Any]]:
        reply = self.request("GET", "/sessions")
        assert reply.status_code == 200, reply.text
        return {view["session"]: view for view in reply.json()["sessions"]}

    def finish(self, name: str, answer: Any) -> dict[str, Any]:
        preview = self.request("POST", f"/sessions/{name}/preview", json=answer)
        reply = self.request("POST", f"/sessions/{name}/finish", json=answer)
        assert reply.status_code == 200, reply.text
        verdict: dict[str, Any] = reply.json()
        assert preview.json()["status"] == verdict["status"], (preview.text, reply.text)
        return verdict


@dataclass
class Agent:
    """An HTTP agent browsing through its session's own address, remembering what it sent."""

    session: str
    proxy: str
    sent: list[str] = field(default_factory=list)

    def step(self, url: str, *, timeout: float = 60) -> int:
        with requests.Session() as session:
            session.trust_env = False
            reply = session.get(url, proxies={"http": self.proxy}, headers=NAVIGATION, timeout=timeout)
        if reply.status_code == 200:
            self.sent.append(url)
        return reply.status_code


class FromAddress(HTTPAdapter):
    """Requests sent from one of the machine's addresses (an agent beside the worker, not the worker)."""

    def __init__(self, address: str) -> None:
        self.address = address
        super().__init__()

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **{**kwargs, "source_address": (self.address, 0)})

    def proxy_manager_for(self, proxy: str, **kwargs: Any) -> Any:
        return super().proxy_manager_for(proxy, **{**kwargs, "source_address": (self.address, 0)})


def session_from(address: str) -> requests.Session:
    session = requests.Session()
    session.trust_env = False
    session.mount("http://", FromAddress(address))
    return session


def children(pid: int) -> list[int]:
    """The processes whose parent is `pid`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def signal_all(pids: list[int], signum: signal.Signals) -> None:
    for pid in pids:
        os.kill(pid, signum)


def hold_ports(first: int, last: int) -> list[socket.socket]:
    """Listening sockets on every address of this namespace, ports `first`..`last` (busy for others)."""
    held = []
    for port in range(first, last + 1):
        sock = socket.socket()
        sock.bind(("0.0.0.0", port))
        sock.listen()
        held.append(sock)
    return held


def write_sysctl(name: str, value: str) -> None:
    """A network sysctl of the calling thread's namespace (/proc/sys/net is the opener's)."""
    Path("/proc/sys", *name.split(".")).write_text(value)


def read_sysctl(name: str) -> str:
    return Path("/proc/sys", *name.split(".")).read_text().strip()


def parent(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[1])


def chromium_episode(proxy: str, start_url: str, task_id: int) -> dict[str, Any]:
    """The demo's scripted agent for `task_id` in a Chromium of its own through `proxy` (in the calling
    thread's namespace): its answer and every request it saw finished."""
    from playwright.sync_api import sync_playwright

    from tests.site.harness import CHROMIUM, CHROMIUM_ARGS
    from webarena_live.demo.agent import ATTEMPTS

    finished: list[str] = []
    with sync_playwright() as playwright:
        args = [*CHROMIUM_ARGS, f"--proxy-server={proxy}", "--proxy-bypass-list=<-loopback>"]
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=args)
        try:
            page = browser.new_page()
            page.on("requestfinished", lambda request: finished.append(request.url))
            page.set_default_timeout(20_000)
            answer = next(a for a in ATTEMPTS if a.task_id == task_id).act(page, start_url)
        finally:
            browser.close()
    return {"answer": answer, "requests": finished}
