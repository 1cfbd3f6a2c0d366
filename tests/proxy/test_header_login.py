"""Header login (`addon/proxy/header_login.py`): the auto-login header on a site configured for it.

The sites here are real HTTP servers on 127.0.0.1 that, like the official images, let a request in only
when it carries its site's header and send everyone else to a login page: the shop's admin
(`X-M2-Admin-Auto-Login: <user>:<password>`, under `/admin`), the storefront's customer on the same
server at its root (`X-M2-Customer-Auto-Login: <email>:<password>`), and the forum on another
(`X-Postmill-Auto-Login: <username>:<password>`). The agent (curl-like `requests`) never sends a header:
the proxy adds each site's own, the trace records it, and the reference agrees on the written run.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import requests
from mitmproxy.test import taddons, tflow

from tests.support.addon_helpers import ORACLE_JUDGE
from tests.support.oracle_bridge import run_in_oracle
from tests.support.serve_process import finish, launch_serve
from webarena_live.evaluator.site_checks import config_problems
from webarena_live.evaluator.sites import SiteMap
from webarena_live.proxy.header_login import HeaderLogin

HEADER = "X-M2-Admin-Auto-Login"
CREDENTIALS = {"username": "admin", "password": "admin1234"}
CUSTOMER_HEADER = "X-M2-Customer-Auto-Login"
CUSTOMER = {"username": "emma.lopez@gmail.com", "password": "Password.123"}
FORUM_HEADER = "X-Postmill-Auto-Login"
FORUM = {"username": "MarvelsGrantMan136", "password": "test1234"}


class AdminSite(BaseHTTPRequestHandler):
    """The admin under `/admin`, the storefront at the root: each lets in its own header only."""

    def do_GET(self) -> None:
        if self.path.startswith("/admin"):
            wanted, other = (HEADER, "admin:admin1234"), CUSTOMER_HEADER
        else:
            wanted, other = (CUSTOMER_HEADER, "emma.lopez@gmail.com:Password.123"), HEADER
        if self.headers.get(wanted[0]) == wanted[1] and other not in self.headers:
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


class ForumSite(AdminSite):
    def do_GET(self) -> None:
        signed_in = self.headers.get(FORUM_HEADER) == "MarvelsGrantMan136:test1234"
        body = b"<html><body>Forums</body></html>" if signed_in else b"<html><body>Log in</body></html>"
        self.send_response(200 if signed_in else 302)
        if not signed_in:
            self.send_header("Location", "/login")
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def _serve(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def shop() -> Iterator[str]:
    yield from _serve(AdminSite)


@pytest.fixture(scope="module")
def admin(shop: str) -> str:
    return f"{shop}/admin"


@pytest.fixture(scope="module")
def forum() -> Iterator[str]:
    yield from _serve(ForumSite)


def environments(admin: str, **extra: object) -> dict[str, object]:
    return {
        "__SHOPPING_ADMIN__": {"urls": [admin], "use_header_login": True, "credentials": CREDENTIALS, **extra}
    }


def test_misconfigured_header_login_is_refused() -> None:
    bad = {
        "environments": {
            "__GITLAB__": {"urls": ["http://g"], "use_header_login": True, "credentials": CREDENTIALS},
            "__SHOPPING_ADMIN__": {"urls": ["http://h/admin"], "use_header_login": True},
        }
    }
    problems = config_problems(bad)
    assert problems == [
        "environments.__GITLAB__: use_header_login: only __SHOPPING_ADMIN__, __SHOPPING__, __REDDIT__ "
        "has an auto-login header"
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


def every_site(shop: str, forum: str) -> dict[str, object]:
    return {
        "__SHOPPING_ADMIN__": {
            "urls": [f"{shop}/admin"],
            "use_header_login": True,
            "credentials": CREDENTIALS,
        },
        "__SHOPPING__": {"urls": [shop], "use_header_login": True, "credentials": CUSTOMER},
        "__REDDIT__": {"urls": [forum], "use_header_login": True, "credentials": FORUM},
    }


def test_each_site_gets_its_own_header_even_on_one_origin(shop: str, forum: str) -> None:
    login = HeaderLogin()
    with taddons.context(login):
        login.use(SiteMap.from_dict({"environments": every_site(shop, forum)}))
        sent = {}
        for url in (
            f"{shop}/admin/sales/order/",
            f"{shop}/customer/account/",
            f"{shop}/adminx",
            f"{forum}/f/a",
        ):
            flow = tflow.tflow()
            flow.request.url = url
            login.requestheaders(flow)
            sent[url] = {k: v for k, v in flow.request.headers.items() if k.endswith("Auto-Login")}
    assert sent == {
        f"{shop}/admin/sales/order/": {HEADER: "admin:admin1234"},
        f"{shop}/customer/account/": {CUSTOMER_HEADER: "emma.lopez@gmail.com:Password.123"},
        f"{shop}/adminx": {CUSTOMER_HEADER: "emma.lopez@gmail.com:Password.123"},  # not below /admin
        f"{forum}/f/a": {FORUM_HEADER: "MarvelsGrantMan136:test1234"},
    }
    # the customer's credentials may name the e-mail as `email` too
    by_email = {"__SHOPPING__": {"urls": [shop], "use_header_login": True,
                                 "credentials": {"email": "a@b.c", "password": "p"}}}  # fmt: skip
    assert SiteMap.from_dict({"environments": by_email}).login_headers_by_site == {
        "shopping": (CUSTOMER_HEADER, "a@b.c:p")
    }


def test_serve_signs_the_customer_and_the_forum_in_by_header(tmp_path: Path, shop: str, forum: str) -> None:
    tasks = [
        {**TASK, "task_id": 9101, "sites": ["shopping"], "start_urls": ["__SHOPPING__"]},
        {**TASK, "task_id": 9102, "sites": ["reddit"], "start_urls": ["__REDDIT__"]},
    ]
    (tmp_path / "tasks.json").write_text(json.dumps(tasks))
    (tmp_path / "config.json").write_text(json.dumps({"environments": every_site(shop, forum)}))
    serve = launch_serve(tmp_path, "--tasks", "tasks.json", "--config", "config.json", "--output-dir", "out",
                         "--set", "confdir=conf", "--quiet")  # fmt: skip
    control, port = serve.control, serve.proxy_port
    pages = {}
    try:
        for task_id, url in ((9101, f"{shop}/customer/account/"), (9102, f"{forum}/forums")):
            session = f"s{task_id}"
            started = requests.post(
                f"{control}/sessions", json={"task_id": task_id, "session": session}, timeout=10
            )
            started.raise_for_status()
            proxies = {"http": f"http://{session}:x@127.0.0.1:{port}"}
            page = requests.get(url, proxies=proxies, allow_redirects=False, timeout=10)
            (event,) = requests.get(f"{control}/sessions/{session}/trace", timeout=10).json()["events"]
            pages[task_id] = (page.status_code, page.text, event["status"])
    finally:
        serve.stop()
    assert pages == {
        9101: (200, "<html><body>Dashboard</body></html>", 200),
        9102: (200, "<html><body>Forums</body></html>", 200),
    }


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
    judged = run_in_oracle(
        oracle_python, ["-c", ORACLE_JUDGE, str(tmp_path / "tasks.json"),
         json.dumps(environments(admin)), "9100", str(tmp_path / "out" / "9100")],
    )  # fmt: skip
    assert judged.returncode == 0, judged.stderr[-2000:]
    assert json.loads(judged.stdout.strip().splitlines()[-1])["status"] == "success"
