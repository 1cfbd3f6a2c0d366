"""`--redact` keeps cookies, credentials and passwords out of the files the proxy
writes (network.har and the journal), while the live verdict, judged on the full trace in memory,
is unchanged. The trade-off is shown, not just stated: a task that checks a cookie (like official
task 268) succeeds live, but the reference judging the redacted HAR fails it.
"""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus, unquote_to_bytes

import pytest
import requests

from tests.site.harness import start_proxy, write_config
from tests.support.addon_helpers import TASKS, oracle_verdict
from webarena_live.commands.cli import build_parser
from webarena_live.commands.serve import addon_options
from webarena_live.evaluator.evaluate import evaluate_task
from webarena_live.evaluator.har import event_from_har_entry, event_to_har_entry, trace_to_har
from webarena_live.evaluator.sites import SiteMap
from webarena_live.evaluator.tasks import load_tasks
from webarena_live.evaluator.trace import NetworkEvent, NetworkTrace
from webarena_live.runs.outputs import write_outputs
from webarena_live.runs.recovery import find_journal
from webarena_live.runs.redact import (
    REDACTED,
    redact_har,
    redact_har_entry,
    redact_post_text,
    redact_url,
)

SECRETS = ("hunter2", "hunter3", "hunter4", "SECRETSID", "APITOKEN", "bicycle", "cHJveHk6cHc=")
COOKIE_TASK = 9010
ROUTE_ANSWER = {"task_type": "RETRIEVE", "status": "SUCCESS", "retrieved_data": ["Blue Mug"]}


def cookie_task() -> dict[str, Any]:
    """Shaped like official task 268: the answer, and a request that carried a given cookie."""
    return {
        "sites": ["shopping"],
        "task_id": COOKIE_TASK,
        "intent_template_id": 901,
        "start_urls": ["__SHOPPING__/"],
        "intent": "Which mug does the bicycle route recommend?",
        "intent_template": "Which mug does the {{mode}} route recommend?",
        "instantiation_dict": {"mode": "bicycle"},
        "eval": [
            {
                "evaluator": "AgentResponseEvaluator",
                "results_schema": {"type": "array", "items": {"type": "string"}},
                "expected": {"task_type": "retrieve", "status": "SUCCESS", "retrieved_data": ["Blue Mug"]},
            },
            {
                "evaluator": "NetworkEventEvaluator",
                "ignored_query_params_patterns": [".*"],
                "expected": {"url": "^.*/api/route.*$", "headers": {"Cookie": "^.*engine=bicycle.*$"}},
            },
        ],
        "revision": 1,
    }


def har_entry(**request: Any) -> dict[str, Any]:
    base = {
        "method": "POST",
        "url": "http://shop.test/login?next=/&password=hunter4",
        "headers": [
            {"name": "Cookie", "value": "sid=SECRETSID; engine=bicycle"},
            {"name": "Authorization", "value": "Bearer APITOKEN"},
            {"name": "Proxy-Authorization", "value": "Basic cHJveHk6cHc="},
            {"name": "Accept", "value": "text/html"},
        ],
        "cookies": [{"name": "sid", "value": "SECRETSID"}],
        "queryString": [{"name": "next", "value": "/"}, {"name": "password", "value": "hunter4"}],
        "postData": {
            "mimeType": "application/x-www-form-urlencoded",
            "text": "username=alice&password=hunter2&remember=1",
        },
    }
    base.update(request)
    return {
        "startedDateTime": "2026-01-01T00:00:00.000Z",
        "time": 1,
        "request": base,
        "response": {
            "status": 302,
            "headers": [{"name": "Set-Cookie", "value": "sid=SECRETSID; Path=/; HttpOnly"}],
            "cookies": [{"name": "sid", "value": "SECRETSID"}],
            "content": {"size": 0, "mimeType": "text/html"},
            "redirectURL": "/",
        },
    }


def test_redacting_an_entry_removes_every_secret_and_keeps_the_rest():
    entry = har_entry()
    original = copy.deepcopy(entry)
    redacted = redact_har_entry(entry)
    assert entry == original  # the input is not changed
    text = json.dumps(redacted)
    assert not [secret for secret in SECRETS if secret in text], text
    request = redacted["request"]
    headers = {h["name"]: h["value"] for h in request["headers"]}
    assert headers == {
        "Cookie": f"sid={REDACTED}; engine={REDACTED}",
        "Authorization": f"Bearer {REDACTED}",
        "Proxy-Authorization": f"Basic {REDACTED}",
        "Accept": "text/html",
    }
    assert request["postData"]["text"] == "username=alice&password=%5Bredacted%5D&remember=1"
    assert redacted["response"]["headers"][0]["value"] == f"sid={REDACTED}; Path=/; HttpOnly"
    assert request["queryString"][0] == {"name": "next", "value": "/"}
    # Still a HAR entry the evaluator reads.
    assert event_from_har_entry(redacted).url.startswith("http://shop.test/login?next=%2F&password=")


@pytest.mark.parametrize(
    ("mime", "text", "kept"),
    [
        ("application/json", json.dumps({"user": "al", "auth": {"new_password": "hunter3"}}), '"user": "al"'),
        (
            "multipart/form-data; boundary=B",
            '--B\r\nContent-Disposition: form-data; name="user"\r\n\r\nal\r\n'
            '--B\r\nContent-Disposition: form-data; name="login[password]"\r\n\r\nhunter3\r\n--B--\r\n',
            'name="user"\r\n\r\nal\r\n',
        ),
    ],
    ids=["json", "multipart"],
)
def test_password_fields_in_json_and_multipart_posts(mime, text, kept):
    redacted = redact_har_entry(har_entry(postData={"mimeType": mime, "text": text}))["request"]["postData"][
        "text"
    ]
    assert "hunter3" not in redacted and REDACTED in redacted and kept in redacted


def test_a_form_with_bytes_that_are_not_utf8_is_redacted_and_keeps_its_bytes():
    """Raw and percent-escaped windows-1252 bytes (a hand-made client): the password goes, every other
    byte stays (percent-escaped), and nothing raises on the capture path."""
    raw = b"user=caf\xe9&password=s\xe9cret&note=%E9t%E9"
    text = raw.decode("utf-8", "surrogateescape")  # how a body that is not UTF-8 reaches the redaction
    redacted = redact_post_text(text, "application/x-www-form-urlencoded")
    assert redacted.split("&")[1] == "password=" + quote_plus(REDACTED)
    assert [unquote_to_bytes(pair) for pair in redacted.split("&")[::2]] == [
        b"user=caf\xe9",
        b"note=\xe9t\xe9",
    ]
    assert quote_plus(REDACTED) in redact_url(f"http://shop.test/login?{text}")


def test_an_entry_without_secrets_is_left_as_it_is():
    event = NetworkEvent(
        method="GET", url="http://shop.test/p?q=1", status=200, request_headers=(("Accept", "*/*"),)
    )
    entry = event_to_har_entry(event)
    assert redact_har_entry(entry) == entry


def test_write_outputs_redacts_only_when_asked(tmp_path):
    tasks = load_tasks(write_tasks_file(tmp_path))
    trace = NetworkTrace([event_from_har_entry(har_entry())])
    result = evaluate_task(tasks[COOKIE_TASK], ROUTE_ANSWER, trace, site_map=SiteMap())
    record = {"attempt": "a1"}
    plain = write_outputs(
        tmp_path / "plain", task_id=COOKIE_TASK, record=record, raw_response=ROUTE_ANSWER, trace=trace,
        result=result,
    )  # fmt: skip
    assert all(secret in Path(plain["network.har"]).read_text() for secret in ("hunter2", "SECRETSID"))
    hidden = write_outputs(
        tmp_path / "hidden",
        task_id=COOKIE_TASK,
        record=record,
        raw_response=ROUTE_ANSWER,
        trace=trace,
        result=result,
        redact=True,
    )
    har = Path(hidden["network.har"]).read_text()
    assert not [secret for secret in SECRETS if secret in har]
    assert json.loads(har) == redact_har(trace_to_har(trace))


def test_cli_flags_reach_the_addon_options():
    args = build_parser().parse_args(["serve", "--redact", "--control-token", "t0k"])
    options = addon_options(args)
    assert options["webarena_redact"] is True and options["webarena_control_token"] == "t0k"


def test_cli_defaults_and_the_token_from_the_environment(monkeypatch):
    monkeypatch.delenv("WEBARENA_LIVE_CONTROL_TOKEN", raising=False)
    defaults = addon_options(build_parser().parse_args(["serve"]))
    assert defaults["webarena_redact"] is False and defaults["webarena_control_token"] == ""
    monkeypatch.setenv("WEBARENA_LIVE_CONTROL_TOKEN", "from-env")
    assert addon_options(build_parser().parse_args(["serve"]))["webarena_control_token"] == "from-env"


def write_tasks_file(directory: Path) -> Path:
    path = directory / "tasks.json"
    path.write_text(json.dumps([*TASKS, cookie_task()], indent=1))
    return path


class Shop(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, status: int, body: bytes, extra: tuple[tuple[str, str], ...] = ()) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for name, value in extra:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._send(200, json.dumps({"mug": "Blue Mug", "path": self.path}).encode())

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path == "/login":
            cookies = (
                ("Set-Cookie", "sid=SECRETSID; Path=/; HttpOnly"),
                ("Set-Cookie", "engine=bicycle; Path=/"),
            )
            self._send(200, b"{}", cookies)
        else:
            self._send(200, b"{}")


@pytest.fixture(scope="module")
def shop() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Shop)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_redacted_run_live_verdict_and_the_documented_trade_off(tmp_path, shop, oracle_python):
    tasks = write_tasks_file(tmp_path)
    config = write_config(tmp_path / "sites.json", {"__SHOPPING__": {"urls": [shop]}})
    proxy = start_proxy(
        tmp_path / "proxy", tasks=tasks, config=config, extra_options=("webarena_redact=true",)
    )
    try:
        assert proxy.control.get("/health").json()["redact"] is True
        proxy.control.start(COOKIE_TASK, "private")
        client = requests.Session()
        client.trust_env = False
        client.proxies = {"http": f"http://private:pw@127.0.0.1:{proxy.port}"}
        assert client.post(f"{shop}/login", data={"username": "alice", "password": "hunter2"}, timeout=10).ok
        assert client.post(
            f"{shop}/account", json={"user": "alice", "new_password": "hunter3"}, timeout=10
        ).ok
        route = client.get(
            f"{shop}/api/route?to=mug", headers={"Authorization": "Bearer APITOKEN"}, timeout=10
        )
        assert route.ok and route.json()["mug"] == "Blue Mug"
        result = proxy.control.finish("private", ROUTE_ANSWER)
        # Live: judged on the full trace, the cookie the task checks is there.
        assert result["status"] == "success", result
        task_dir = proxy.output_dir / str(COOKIE_TASK)
        written = [
            (task_dir / "network.har").read_text(),
            find_journal(proxy.output_dir / ".journal", "private", COOKIE_TASK).read_text(),
        ]
        for text in written:
            assert not [secret for secret in SECRETS if secret in text]
            assert "sid=" in text and "engine=" in text and "new_password" in text  # names stay
        # The trade-off: the reference, judging the redacted HAR, cannot see the cookie any more.
        verdict = oracle_verdict(oracle_python, tasks, COOKIE_TASK, task_dir, shop)
        assert verdict == {"status": "failure", "score": 0.0}
        # ... while the same run unredacted (the control API's /har serves the trace in memory) passes.
        full_dir = tmp_path / "full" / str(COOKIE_TASK)
        full_dir.mkdir(parents=True)
        (full_dir / "network.har").write_text(proxy.control.get("/sessions/private/har").text)
        (full_dir / "agent_response.json").write_text((task_dir / "agent_response.json").read_text())
        assert oracle_verdict(oracle_python, tasks, COOKIE_TASK, full_dir, shop) == {
            "status": "success",
            "score": 1.0,
        }
    finally:
        proxy.stop()
