"""Header login (`addon/proxy/header_login.py`): the auto-login header on a site configured for it.

The admin site here is a real HTTP server on 127.0.0.1 that, like the
official shop admin, lets a request in only when it carries
`X-M2-Admin-Auto-Login: <user>:<password>`, and sends everyone else to its
login page. The agent (curl-like `requests`) never sends the header: the proxy
adds it, the trace records it, and the reference agrees on the written run.
"""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import requests
from mitmproxy.test import taddons, tflow

from tests.support.addon_helpers import ORACLE_JUDGE
from tests.support.serve_process import finish, launch_serve
from webarena_live.evaluator.site_checks import config_problems
from webarena_live.evaluator.sites import SiteMap
from webarena_live.proxy.header_login import HeaderLogin

HEADER = "X-M2-Admin-Auto-Login"
CREDENTIALS = {"username": "admin", "password": "admin1234"}


class AdminSite(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.headers.get(HEADER) == "admin:admin1234":
            body = b"<html><body>Dashboard</body></html>"
            self.send_response(200)
        else:
            body = b"<html><body>Sign in</body></html>"
            self.send_response(302)
            self.send_header("Location", "/admin/login")
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def admin() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), AdminSite)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/admin"
    server.shutdown()


def environments(admin: str, **extra: object) -> dict[str, object]:
    return {
        "__SHOPPING_ADMIN__": {"urls": [admin], "use_header_login": True, "credentials": CREDENTIALS, **extra}
    }


def test_misconfigured_header_login_is_refused() -> None:
    bad = {
        "environments": {
            "__SHOPPING__": {"urls": ["http://h"], "use_header_login": True, "credentials": CREDENTIALS},
            "__SHOPPING_ADMIN__": {"urls": ["http://h/admin"], "use_header_login": True},
        }
    }
    problems = config_problems(bad)
    assert problems == [
        "environments.__SHOPPING__: use_header_login: only __SHOPPING_ADMIN__ has an auto-login header"
    ]
    # Without credentials (the reference's config allows it) nothing is refused and no header is added.
    site_map = SiteMap.from_dict(bad)
    assert site_map.header_login_without_credentials == ["__SHOPPING_ADMIN__"]
    assert [header for _, header, _ in site_map.login_headers] == []


def test_the_header_goes_to_the_sites_origins_only_and_never_over_the_clients(admin: str) -> None:
    login = HeaderLogin()
    with taddons.context(login):
        login.use(SiteMap.from_dict({"environments": environments(admin)}))
        port = admin.split(":")[2].split("/")[0]
        flow = tflow.tflow()
        flow.request.host, flow.request.port, flow.request.path = "127.0.0.1", int(port), "/static/app.js"
        login.requestheaders(flow)
        assert flow.request.headers[HEADER] == "admin:admin1234"
        other = tflow.tflow()
        other.request.host, other.request.port = "127.0.0.1", int(port) + 1
        login.requestheaders(other)
        assert HEADER not in other.request.headers
        own = tflow.tflow()
        own.request.host, own.request.port = "127.0.0.1", int(port)
        own.request.headers[HEADER] = "someone:else"
        login.requestheaders(own)
        assert own.request.headers[HEADER] == "someone:else"


TASK = {
    "sites": ["shopping_admin"],
    "task_id": 9100,
    "intent_template_id": 9100,
    "start_urls": ["__SHOPPING_ADMIN__"],
    "intent": "Open the admin dashboard.",
    "intent_template": "Open the admin dashboard.",
    "instantiation_dict": {},
    "revision": 1,
    "eval": [
        {
            "evaluator": "AgentResponseEvaluator",
            "results_schema": {"type": "null"},
            "expected": {"task_type": "navigate", "status": "SUCCESS", "retrieved_data": None},
        },
        {
            "evaluator": "NetworkEventEvaluator",
            "expected": {
                "url": "__SHOPPING_ADMIN__/dashboard",
                "response_status": 200,
                "headers": {HEADER: "^admin:.+$"},
            },
        },
    ],
}


def test_serve_logs_agents_in_by_header_and_the_reference_agrees(
    tmp_path: Path, admin: str, oracle_python: Path
) -> None:
    (tmp_path / "tasks.json").write_text(json.dumps([TASK]))
    (tmp_path / "config.json").write_text(json.dumps({"environments": environments(admin)}))
    serve = launch_serve(tmp_path, "--tasks", "tasks.json", "--config", "config.json", "--output-dir", "out",
                         "--set", "confdir=conf", "--quiet")  # fmt: skip
    control, port = serve.control, serve.proxy_port
    try:
        requests.post(
            f"{control}/sessions", json={"task_id": 9100, "session": "ops"}, timeout=10
        ).raise_for_status()
        proxies = {"http": f"http://ops:x@127.0.0.1:{port}"}
        page = requests.get(
            f"{admin}/dashboard", proxies=proxies, headers={"Accept": "text/html"}, timeout=10
        )
        assert page.status_code == 200 and "Dashboard" in page.text  # the site saw the header
        (event,) = requests.get(f"{control}/sessions/ops/trace", timeout=10).json()["events"]
        answer = {"task_type": "navigate", "status": "SUCCESS", "retrieved_data": None}
        result = finish(control, "ops", answer, timeout=10).json()
    finally:
        serve.stop()
    assert event["status"] == 200 and result["status"] == "success", result
    har = json.loads((tmp_path / "out" / "9100" / "network.har").read_text())
    sent = {h["name"]: h["value"] for h in har["log"]["entries"][0]["request"]["headers"]}
    assert sent[HEADER] == "admin:admin1234"  # recorded as the browser would have sent it
    judged = subprocess.run(
        [str(oracle_python), "-c", ORACLE_JUDGE, str(tmp_path / "tasks.json"),
         json.dumps(environments(admin)), "9100", str(tmp_path / "out" / "9100")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert judged.returncode == 0, judged.stderr[-2000:]
    assert json.loads(judged.stdout.strip().splitlines()[-1])["status"] == "success"
