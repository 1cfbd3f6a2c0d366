"""The browser's own service traffic is answered by the proxy itself: never sent on, never looked up.

First in mitmproxy's own test harness (the hooks' decisions: a request and a CONNECT answered and
listed, `--forward-browser-traffic` forwarding them, a service host mapped as a site being a site's),
then through a real `webarena-live serve`, whose lookups and connections the suite's network guard
watches (`tests/support/network_guard.py`); last the guard itself, shown to catch a proxy that
reaches beyond loopback (the one test here that makes it try, and takes the notes itself).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from mitmproxy.proxy import server_hooks
from mitmproxy.test import taddons, tflow

from tests.proxy.test_addon import run_flow, trace_urls
from tests.support import network_guard
from tests.support.addon_helpers import SHOP, make_flow, write_config, write_tasks
from tests.support.serve_process import shop, start_serve
from webarena_live.proxy.addon import SKIP_KEY, WebArenaLive
from webarena_live.proxy.browser_traffic import ANSWER_HEADER, ANSWER_STATUS
from webarena_live.runs.sessions import DEFAULT_SESSION

__all__ = ["shop"]  # a fixture

UPDATE = "http://update.googleapis.com/service/update2/json?cup2key=13:1"


def _live(tmp_path: Path, *, forward: bool = False, site: str = SHOP) -> Iterator[WebArenaLive]:
    addon = WebArenaLive()
    with taddons.context(addon) as tctx:
        tctx.configure(
            addon,
            webarena_tasks=str(write_tasks(tmp_path)),
            webarena_config=str(write_config(tmp_path, site)),
            webarena_forward_browser_traffic=forward,
        )
        yield addon


@pytest.fixture
def live(tmp_path: Path) -> Iterator[WebArenaLive]:
    yield from _live(tmp_path)


def _listed(addon: WebArenaLive, session: str = DEFAULT_SESSION) -> tuple[int, list[str]]:
    assert addon.context is not None
    attempt = addon.context.sessions.get_or_create(session).attempt
    return attempt.browser_requests, list(attempt.recent_browser_requests)


def _connect(host: str, port: int = 443) -> tflow.HTTPFlow:
    flow = tflow.tflow(req=None)
    flow.request.method, flow.request.host, flow.request.port = "CONNECT", host, port
    flow.client_conn.sockname = ("127.0.0.1", 8080)
    return flow


def test_a_service_request_is_answered_here_listed_and_no_event(live: WebArenaLive) -> None:
    flow = make_flow("POST", UPDATE, body=b"{}", status=None)
    flow.client_conn.sockname = ("127.0.0.1", 8080)
    live.requestheaders(flow)
    assert flow.response is not None and flow.response.status_code == ANSWER_STATUS
    assert flow.response.headers[ANSWER_HEADER] == "browser-service" and flow.metadata[SKIP_KEY]
    live.response(flow)  # mitmproxy still runs the response hook on an answer given here
    assert _listed(live) == (1, [f"POST {UPDATE}"]) and trace_urls(live, DEFAULT_SESSION) == []


def test_a_connect_to_a_service_host_is_answered_here_and_listed(live: WebArenaLive) -> None:
    connect = _connect("safebrowsing.googleapis.com")
    live.http_connect(connect)
    assert connect.response is not None and connect.response.status_code == ANSWER_STATUS
    live.http_connect_error(connect)  # a non-2xx CONNECT answer: no status-0 event either
    assert _listed(live) == (1, ["CONNECT safebrowsing.googleapis.com:443"])
    assert trace_urls(live, DEFAULT_SESSION) == []
    site = _connect("shop.test")
    live.http_connect(site)
    assert site.response is None  # a site's tunnel goes through


def test_no_connection_to_a_service_host_is_opened(live: WebArenaLive) -> None:
    """The last line of defence: whatever route reached `server_connect`, it is refused there."""
    for host, refused in (("update.googleapis.com", True), ("shop.test", False), ("127.0.0.1", False)):
        data = server_hooks.ServerConnectionHookData(client=tflow.tclient_conn(), server=tflow.tserver_conn())
        data.server.address = (host, 80)
        data.server.error = None
        live.server_connect(data)
        assert bool(data.server.error) is refused, host


def test_forward_browser_traffic_forwards_but_never_captures(tmp_path: Path) -> None:
    for addon in _live(tmp_path, forward=True):
        flow = run_flow(addon, make_flow("POST", UPDATE, body=b"{}", status=200))
        assert flow.response is not None and ANSWER_HEADER not in flow.response.headers  # the upstream's
        assert _listed(addon) == (1, [f"POST {UPDATE}"]) and trace_urls(addon, DEFAULT_SESSION) == []
        connect = _connect("update.googleapis.com")
        addon.http_connect(connect)
        assert connect.response is None
        data = server_hooks.ServerConnectionHookData(client=tflow.tclient_conn(), server=tflow.tserver_conn())
        data.server.address, data.server.error = ("update.googleapis.com", 443), None
        addon.server_connect(data)
        assert data.server.error is None


def test_a_service_host_mapped_as_a_site_is_a_sites(tmp_path: Path) -> None:
    for addon in _live(tmp_path, site="http://dl.google.com"):
        flow = run_flow(addon, make_flow("GET", "http://dl.google.com/p", status=200))
        assert flow.response is not None and flow.response.status_code == 200
        assert trace_urls(addon, DEFAULT_SESSION) == ["http://dl.google.com/p"] and _listed(addon)[0] == 0


def test_a_real_proxy_answers_the_browsers_own_requests_and_reaches_nothing(
    tmp_path: Path, shop: str
) -> None:
    """Through `webarena-live serve`: a service POST over HTTP and an HTTPS CONNECT, on a session's own
    address, are answered by the proxy, listed in the session, no event; the proxy looked nothing up."""
    assert network_guard.GUARD is not None
    network_guard.GUARD.take()
    served, control, _ = start_serve(tmp_path, shop, tmp_path / "state")
    try:
        started = requests.post(f"{control}/sessions", json={"task_id": 1003, "session": "home"}, timeout=30)
        proxy = {"http": started.json()["proxy"], "https": started.json()["proxy"]}
        answered = requests.post(UPDATE, data=b"{}", proxies=proxy, timeout=30)
        assert answered.status_code == ANSWER_STATUS and answered.headers[ANSWER_HEADER] == "browser-service"
        with pytest.raises(requests.exceptions.ProxyError, match="403"):
            requests.get("https://clients2.google.com/service/update2/crx", proxies=proxy, timeout=30)
        requests.get(f"{shop}/", proxies=proxy, timeout=30).raise_for_status()
        view = requests.get(f"{control}/sessions/home", timeout=10).json()
        events = requests.get(f"{control}/sessions/home/trace", timeout=10).json()["events"]
    finally:
        served.stop()
    assert view["browser_requests"] == {
        "count": 2, "recent": [f"POST {UPDATE}", "CONNECT clients2.google.com:443"]
    }  # fmt: skip
    assert [event["url"] for event in events] == [f"{shop}/"]
    assert network_guard.GUARD.take() == []  # no lookup, no connection beyond loopback


def test_the_guard_catches_a_proxy_that_reaches_beyond_loopback(tmp_path: Path, shop: str) -> None:
    """A request for a documentation-only address (192.0.2.0/24) and a name under `.invalid`, through
    a real proxy: the guard notes the connection and the lookup, and refuses both (nothing leaves)."""
    assert network_guard.GUARD is not None
    network_guard.GUARD.take()
    served, _, proxy = start_serve(tmp_path, shop, tmp_path / "state")
    try:
        for url in ("http://192.0.2.10:9/", "http://guard-probe.invalid/"):
            assert requests.get(url, proxies={"http": proxy}, timeout=30).status_code == 502
    finally:
        served.stop()
    reached = sorted(note["reached"] for note in network_guard.GUARD.take())
    assert reached == ["socket.connect 192.0.2.10:9", "socket.getaddrinfo 'guard-probe.invalid'"], reached
