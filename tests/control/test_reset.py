"""Environment reset (`addon/replicas/reset.py`) against real endpoints on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.support.addon_helpers import NAVIGATE_TASK, SHOP, write_tasks
from tests.support.control_in_process import handle_request
from webarena_live.control.context import ControlContext
from webarena_live.evaluator.sites import SiteMap
from webarena_live.evaluator.tasks import load_tasks
from webarena_live.replicas.reset import reset_sites, sites_without_reset
from webarena_live.runs.sessions import SessionStore
from webarena_live.runs.settings import RunSettings

CALLS: list[str] = []


class EnvControl(BaseHTTPRequestHandler):
    """Answers like the environment-control server: JSON with `success`, or a failure, or slowly."""

    def do_POST(self) -> None:
        CALLS.append(self.path)
        if self.path.startswith("/slow"):
            time.sleep(2)
        status, body = {
            "/ok": (200, {"success": True, "message": "restarted"}),
            "/refused": (200, {"success": False, "message": "container not found"}),
            "/broken": (500, {"detail": "boom"}),
        }.get(self.path.split("?")[0], (200, {"success": True}))
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def control() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), EnvControl)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def site_map(**reset_paths: str) -> SiteMap:
    return SiteMap.from_dict(
        {
            "environments": {
                f"__{site.upper()}__": {"urls": ["http://h"], "reset_url": url}
                for site, url in reset_paths.items()
            }
        }
    )


def test_sites_are_reset_concurrently_and_each_outcome_is_told(control: str) -> None:
    sites = site_map(shopping=f"{control}/ok", gitlab=f"{control}/refused", reddit=f"{control}/broken")
    outcomes = {o.site: o for o in asyncio.run(reset_sites(sites, ("shopping", "gitlab", "reddit")))}
    assert outcomes["__SHOPPING__"].ok and outcomes["__SHOPPING__"].detail == "restarted"
    assert not outcomes["__GITLAB__"].ok and "container not found" in outcomes["__GITLAB__"].detail
    assert not outcomes["__REDDIT__"].ok and outcomes["__REDDIT__"].status == 500


def test_a_slow_endpoint_times_out_and_an_unreachable_one_fails(control: str) -> None:
    sites = site_map(shopping=f"{control}/slow", gitlab="http://127.0.0.1:9/reset")
    started = time.perf_counter()
    outcomes = {o.site: o for o in asyncio.run(reset_sites(sites, ("shopping", "gitlab"), timeout=0.5))}
    assert time.perf_counter() - started < 1.9  # both at once, neither waited out in full
    assert not outcomes["__SHOPPING__"].ok and "no answer within 0.5 s" in outcomes["__SHOPPING__"].detail
    assert not outcomes["__GITLAB__"].ok and "ConnectError" in outcomes["__GITLAB__"].detail


def test_sites_without_a_reset_url_are_named(control: str) -> None:
    sites = site_map(shopping=f"{control}/ok")
    assert sites_without_reset(sites, ("shopping", "gitlab")) == ["__GITLAB__"]


def test_post_sessions_resets_first_and_refuses_to_start_when_a_reset_fails(
    control: str, tmp_path: Path
) -> None:
    """Through the control API: reset outcomes in the answer; a failure is a 502 and no session starts."""

    def context(reset_path: str) -> ControlContext:
        env = {"__SHOPPING__": {"urls": [SHOP], "reset_url": f"{control}{reset_path}"}}
        settings = RunSettings(SiteMap.from_dict({"environments": env}), journal_dir=tmp_path / "journal")
        return ControlContext(tasks=load_tasks(write_tasks(tmp_path)), sessions=SessionStore(settings))

    body = json.dumps({"task_id": NAVIGATE_TASK, "session": "fresh", "reset": True}).encode()
    CALLS.clear()
    good = context("/ok")
    reply = handle_request(good, "POST", "/sessions", body)
    started = json.loads(reply.body)
    assert reply.status == 200 and started["session"] == "fresh", started
    assert [(r["site"], r["ok"], r["detail"]) for r in started["reset"]] == [
        ("__SHOPPING__", True, "restarted")
    ]
    assert CALLS == ["/ok"]
    bad = context("/refused")
    reply = handle_request(bad, "POST", "/sessions", body)
    refused = json.loads(reply.body)
    assert reply.status == 502 and refused["error"] == "reset_failed", refused
    assert (
        refused["detail"][0]["site"] == "__SHOPPING__"
        and "container not found" in refused["detail"][0]["detail"]
    )
    assert bad.sessions.get("fresh") is None  # the session did not start
