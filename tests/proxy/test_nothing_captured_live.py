"""A finish of a session that captured nothing says what the proxy saw of it, through a real
`webarena-live serve`: its browser's own service traffic (answered by the proxy, never forwarded) and a
tunnel to a host outside the site map, named in the `409 no_events`, its preview and the session's view;
and what it says to do works: abandoned, then finished, the session is judged and its address is free
for the next start (a single session port, as one agent's browser server uses it)."""

from __future__ import annotations

import http.client
from pathlib import Path

import pytest
import requests

from tests.support.serve_process import NAVIGATED, serve_on_one_address, shop
from webarena_live.launch import free_ports

__all__ = ["shop"]  # a fixture

pytestmark = pytest.mark.timeout(120)


def test_no_events_names_what_the_proxy_saw_and_the_way_out_works(tmp_path: Path, shop: str) -> None:
    served, control, port = serve_on_one_address(tmp_path, shop)
    try:
        started = requests.post(f"{control}/sessions", json={"task_id": 1003, "session": "mcp-1"}, timeout=30)
        assert started.json()["proxy"] == f"http://127.0.0.1:{port}", started.text
        browser = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        browser.request("POST", "http://update.googleapis.com/service/update2/json", body=b"{}")
        assert browser.getresponse().read().startswith(b"webarena-live: the browser's own service traffic")
        (closed,) = free_ports(1)  # nobody listens there: the tunnel cannot be opened
        browser.request("CONNECT", f"127.0.0.1:{closed}", headers={"Host": f"127.0.0.1:{closed}"})
        assert browser.getresponse().status == 502
        browser.close()

        refused = requests.post(f"{control}/sessions/mcp-1/finish", json=NAVIGATED, timeout=30)
        assert (refused.status_code, refused.json()["error"]) == (409, "no_events"), refused.text
        said = refused.json()["detail"]
        assert "the proxy saw only 1 request of the browser's own services (update.googleapis.com)" in said
        assert f"to hosts that are no site of the site map (127.0.0.1:{closed})" in said
        assert f"none to the task's sites ({shop.removeprefix('http://')})" in said
        assert "POST /sessions/mcp-1/abandon" in said
        preview = requests.post(f"{control}/sessions/mcp-1/preview", json=NAVIGATED, timeout=30)
        assert (preview.status_code, preview.json()["detail"]) == (409, said)
        view = requests.get(f"{control}/sessions/mcp-1", timeout=30).json()
        assert view["nothing_captured"] == said  # what the dashboard shows

        # The address stays held: a new session name finds the single port taken.
        other = requests.post(f"{control}/sessions", json={"task_id": 1003, "session": "mcp-2"}, timeout=30)
        assert (other.status_code, other.json()["error"]) == (503, "no_address"), other.text
        # What the answer says to do: abandon, then finish. The finish judges it and frees the address.
        abandoned = requests.post(f"{control}/sessions/mcp-1/abandon", json={}, timeout=30)
        assert abandoned.status_code == 200, abandoned.text
        judged = requests.post(f"{control}/sessions/mcp-1/finish", json=NAVIGATED, timeout=30)
        assert judged.status_code == 200 and judged.json()["lease_ended"] == "abandoned", judged.text
        again = requests.post(f"{control}/sessions", json={"task_id": 1003, "session": "mcp-2"}, timeout=30)
        assert again.json()["proxy"] == f"http://127.0.0.1:{port}", again.text
    finally:
        served.stop()
