"""What browser-use's Chromium sends by itself, seen in its runs (tests/browseruse), is answered by the
proxy as the browser's own traffic: Chromium's warm-up of a DuckDuckGo default search engine, and the
logo of the screensaver browser-use draws on its blank tab. Neither is looked up nor captured."""

from __future__ import annotations

import pytest

from tests.proxy.test_addon import trace_urls
from tests.proxy.test_browser_services import _connect, _listed, live
from webarena_live.proxy.addon import WebArenaLive
from webarena_live.proxy.browser_traffic import ANSWER_STATUS, is_service_host
from webarena_live.runs.sessions import DEFAULT_SESSION

__all__ = ["live"]  # a fixture


@pytest.mark.parametrize("host", ["start.duckduckgo.com", "cf.browser-use.com"])
def test_browser_uses_own_requests_are_answered_here(live: WebArenaLive, host: str) -> None:
    connect = _connect(host)
    live.http_connect(connect)
    assert connect.response is not None and connect.response.status_code == ANSWER_STATUS
    live.http_connect_error(connect)
    assert _listed(live) == (1, [f"CONNECT {host}:443"]) and trace_urls(live, DEFAULT_SESSION) == []


def test_a_search_an_agent_makes_is_no_browser_traffic() -> None:
    for host in ("duckduckgo.com", "html.duckduckgo.com", "browser-use.com"):
        assert not is_service_host[host], host
    assert is_service_host["start.duckduckgo.com"] and is_service_host["cf.browser-use.com"]
