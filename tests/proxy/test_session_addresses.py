"""A proxy address per session, through a real `webarena-live serve`: no credentials anywhere.

`POST /sessions` answers `proxy`: a listening port of that session's own. Plain HTTP clients
send their traffic there without credentials; the port is the session's until it finishes (a
restart keeps it), a range that is used up answers a JSON 503, and credentials sent to a session's
address name nothing.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import requests

from tests.support.serve_process import NAVIGATED, NAVIGATION, finish, free_range, shop, start_serve

__all__ = ["shop"]  # a fixture

pytestmark = pytest.mark.timeout(120)


def _listening(url: str) -> bool:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=1).close()
    except OSError:
        return False
    return True


def test_each_session_has_its_own_address(tmp_path: Path, shop: str) -> None:
    low = free_range(2)
    ports, out = f"{low}-{low + 1}", str(tmp_path / "out")
    served, control, _ = start_serve(
        tmp_path, shop, tmp_path / "state", "--session-ports", ports, "--output-dir", out
    )
    try:
        a = requests.post(f"{control}/sessions", json={"task_id": 1003, "session": "a"}, timeout=30).json()
        b = requests.post(f"{control}/sessions", json={"task_id": 1003, "session": "b"}, timeout=30).json()
        assert {a["proxy"], b["proxy"]} == {f"http://127.0.0.1:{low}", f"http://127.0.0.1:{low + 1}"}
        # The range is used up: a clear JSON 503, and nothing started.
        c = requests.post(f"{control}/sessions", json={"task_id": 1003, "session": "c"}, timeout=30)
        assert c.status_code == 503 and c.json()["error"] == "no_address", c.text
        assert f"{low}-{low + 1}" in c.json()["detail"]
        assert requests.get(f"{control}/sessions/c", timeout=10).status_code == 404

        # Each address carries its session's traffic, with no credentials; credentials sent to an
        # address name nothing (they are taken off and ignored).
        requests.get(f"{shop}/", proxies={"http": a["proxy"]}, headers=NAVIGATION, timeout=10)
        via_b = b["proxy"].replace("http://", "http://someone-else:x@")
        requests.get(f"{shop}/enamel-camp-mug.html", proxies={"http": via_b}, headers=NAVIGATION, timeout=10)
        trace_a = requests.get(f"{control}/sessions/a/trace", timeout=10).json()["events"]
        trace_b = requests.get(f"{control}/sessions/b/trace", timeout=10).json()["events"]
        assert [e["url"] for e in trace_a] == [f"{shop}/"]
        assert [e["url"] for e in trace_b] == [f"{shop}/enamel-camp-mug.html"]
        assert requests.get(f"{control}/sessions/someone-else", timeout=10).status_code == 404
        assert requests.get(f"{control}/sessions/a", timeout=10).json()["proxy"] == a["proxy"]

        # A restart keeps the address; a finish releases it (the listener closes, the port is free).
        again = requests.post(f"{control}/sessions", json={"task_id": 1003, "session": "a", "restart": True},
                              timeout=30).json()  # fmt: skip
        assert again["proxy"] == a["proxy"]
        assert finish(control, "b", NAVIGATED).json()["status"] == "success"
        assert "proxy" not in requests.get(f"{control}/sessions/b", timeout=10).json()
        pac = requests.get(f"{control}/sessions/b/proxy.pac", timeout=10)
        assert pac.status_code == 409 and pac.json()["error"] == "no_address"
        for _ in range(100):
            if not _listening(b["proxy"]):
                break
        assert not _listening(b["proxy"])
        c = requests.post(f"{control}/sessions", json={"task_id": 1003, "session": "c"}, timeout=30).json()
        assert c["proxy"] == b["proxy"]  # the released port goes to the next session
    finally:
        served.stop()


def test_the_pac_file_sends_static_assets_direct(tmp_path: Path, shop: str) -> None:
    served, control, _ = start_serve(tmp_path, shop, tmp_path / "state", "--control-token", "t0k")
    try:
        auth = {"Authorization": "Bearer t0k"}
        started = requests.post(f"{control}/sessions", json={"task_id": 1003, "session": "s"}, headers=auth,
                                timeout=30).json()  # fmt: skip
        # Public (the browser fetches it with no way to send a token): it reveals a port only.
        pac = requests.get(f"{control}/sessions/s/proxy.pac", timeout=10)
        assert pac.status_code == 200
        assert pac.headers["content-type"].startswith("application/x-ns-proxy-autoconfig")
        assert f'return "PROXY {started["proxy"].removeprefix("http://")}";' in pac.text
        assert '".css"' in pac.text and '".woff2"' in pac.text
        assert requests.get(f"{control}/sessions/s", timeout=10).status_code == 401
    finally:
        served.stop()


def test_with_workers_the_range_is_shared_and_its_end_is_a_503(tmp_path: Path, shop: str) -> None:
    low = free_range(3)
    args = ("--workers", "2", "--session-ports", f"{low}-{low + 2}")
    served, control, _ = start_serve(tmp_path, shop, tmp_path / "state", *args)
    try:
        started = [
            requests.post(
                f"{control}/sessions", json={"task_id": 1003, "session": f"w{i}"}, timeout=30
            ).json()
            for i in range(3)
        ]
        proxies = sorted(s.get("proxy", "") for s in started)
        assert proxies == [f"http://127.0.0.1:{p}" for p in range(low, low + 3)], started  # shown if not
        assert {s["worker"] for s in started} == {0, 1}
        full = requests.post(f"{control}/sessions", json={"task_id": 1003, "session": "w3"}, timeout=30)
        assert full.status_code == 503 and full.json()["error"] == "no_address", full.text
        requests.get(f"{shop}/", proxies={"http": started[0]["proxy"]}, headers=NAVIGATION, timeout=10)
        assert finish(control, "w0", NAVIGATED).json()["status"] == "failure"
        again = requests.post(
            f"{control}/sessions", json={"task_id": 1003, "session": "w3"}, timeout=30
        ).json()
        assert again["proxy"] == started[0]["proxy"]  # released by the finish, on whichever worker
    finally:
        served.stop()


def test_an_address_listens_from_its_start_while_others_open_and_close(tmp_path: Path, shop: str) -> None:
    """Sessions started and finished from 8 threads at once: each address answers the moment its start
    has answered. (mitmproxy updates its listeners in a task per change of `mode`; an update that ran
    ahead of older ones let them close a port just opened, for a moment.)"""
    from concurrent.futures import ThreadPoolExecutor

    served, control, _ = start_serve(tmp_path, shop, tmp_path / "state", "--quiet")

    def one(index: int) -> None:
        name = f"churn-{index}"
        started = requests.post(f"{control}/sessions", json={"task_id": 1003, "session": name}, timeout=30)
        proxy = started.json()["proxy"]
        reply = requests.get(f"{shop}/?i={index}", proxies={"http": proxy}, headers=NAVIGATION, timeout=10)
        assert reply.status_code == 200
        assert (
            requests.post(f"{control}/sessions/{name}/finish", json=NAVIGATED, timeout=30).status_code == 200
        )

    try:
        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(one, range(160)))
    finally:
        served.stop()
