"""A session's address passed to the next session takes the connections kept open on it along.

An agent's browser (or MCP browser server) is started once with `--proxy-server` set to one session's
address and used for task after task: when that session finishes and the next start gets the same port
(`--session-ports P-P`, or the lowest free port of a range), the browser's keep-alive connections to
the proxy are still open. Each request on them is the address's holder's now (`proxy/connections.py`,
`ClientConnections.session_of`), not the finished session's: nothing is answered `410 Gone` or counted
as a late event of the session before. Through a real `webarena-live serve`, a plain HTTP/1.1
keep-alive client (the same socket across both sessions), and the connection bookkeeping on its own.
"""

from __future__ import annotations

import http.client
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import requests

from tests.support.serve_process import NAVIGATED, NAVIGATION, finish, serve_on_one_address, shop, trace_urls
from webarena_live.proxy.connections import ClientConnections
from webarena_live.proxy.session_addresses import SessionAddresses

__all__ = ["shop"]  # a fixture

pytestmark = pytest.mark.timeout(120)


def _get(connection: http.client.HTTPConnection, url: str) -> int:
    connection.request("GET", url, headers=NAVIGATION)
    reply = connection.getresponse()
    reply.read()
    return reply.status


def test_a_kept_connection_goes_with_its_address_to_the_next_session(tmp_path: Path, shop: str) -> None:
    served, control, port = serve_on_one_address(tmp_path, shop, "--output-dir", str(tmp_path / "out"))
    try:
        first = requests.post(f"{control}/sessions", json={"task_id": 1003, "session": "task-a"}, timeout=30)
        assert first.json()["proxy"] == f"http://127.0.0.1:{port}", first.text
        browser = http.client.HTTPConnection("127.0.0.1", port, timeout=30)  # one socket, kept alive
        assert _get(browser, f"{shop}/") == 200
        socket_of_a = browser.sock
        assert finish(control, "task-a", NAVIGATED).status_code == 200

        # The next session, under a new name, gets the same address: the browser changes nothing.
        second = requests.post(f"{control}/sessions", json={"task_id": 1003, "session": "task-b"}, timeout=30)
        assert second.json()["proxy"] == first.json()["proxy"], second.text
        assert _get(browser, f"{shop}/enamel-camp-mug.html") == 200  # today: the finished a's late event
        assert browser.sock is socket_of_a  # the same connection carried it
        assert trace_urls(control, "task-b") == [f"{shop}/enamel-camp-mug.html"]
        a = requests.get(f"{control}/sessions/task-a", timeout=10).json()
        assert "late_events" not in a and a["counts"]["total"] == 1, a
        verdict = finish(control, "task-b", NAVIGATED)
        assert (verdict.status_code, verdict.json()["status"]) == (200, "success"), verdict.text
        browser.close()
    finally:
        served.stop()


def _client(cid: str, port: int, peer: str = "127.0.0.1") -> Any:
    return SimpleNamespace(id=cid, sockname=("127.0.0.1", port), peername=(peer, 40000))


def test_a_pinned_connection_is_its_address_holder_now() -> None:
    addresses = SessionAddresses()
    connections = ClientConnections(addresses, {})
    addresses.by_port[20000] = "a"
    connections.connected(_client("c1", 20000))
    assert connections.session_of(_client("c1", 20000)) == "a"
    del addresses.by_port[20000]  # a finished: nobody holds the address, its connections stay a's
    assert connections.session_of(_client("c1", 20000)) == "a"
    addresses.by_port[20000] = "b"  # the next start got the port
    assert connections.session_of(_client("c1", 20000)) == "b"
    assert connections.pinned["c1"] == "b"  # re-pinned once, then a plain lookup
    assert connections.session_of(_client("c2", 20000)) is None  # never pinned: credentials name it

    # Beyond loopback the new holder's guests decide: a client a let in is a stranger to b.
    addresses.guarded = True
    addresses.by_port[20001] = "c"
    addresses.guests.admit("c", "10.0.0.5")
    connections.connected(_client("c3", 20001, peer="10.0.0.5"))
    assert "c3" not in connections.strangers
    addresses.by_port[20001] = "d"
    addresses.guests.admit("d", "10.0.0.6")
    assert connections.session_of(_client("c3", 20001, peer="10.0.0.5")) == "d"
    assert "c3" in connections.strangers
