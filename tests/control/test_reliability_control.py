"""Bad input on every control route gets a 4xx JSON error naming the problem and
changes nothing; the OpenAPI document describes the routes that answer.

The routes run as the real functions over a real task file, real sessions and
real journal/output directories; after every bad request the whole observable
state (sessions, traces, files on disk) is compared with a snapshot taken before.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import requests

from tests.site.harness import free_port, start_proxy, write_config
from tests.support.addon_helpers import (
    MUTATE_TASK,
    NAVIGATE_TASK,
    SHOP,
    browser_headers,
    make_flow,
    write_tasks,
)
from tests.support.control_in_process import call
from webarena_live.control.app import openapi_document
from webarena_live.control.context import ControlContext
from webarena_live.control.middleware import MAX_CONTROL_BODY
from webarena_live.evaluator.sites import SiteMap
from webarena_live.evaluator.tasks import load_tasks
from webarena_live.proxy.capture import event_from_flow
from webarena_live.runs.sessions import SessionStore
from webarena_live.runs.settings import RunSettings

NAVIGATE_DONE = {"task_type": "NAVIGATE", "status": "SUCCESS", "retrieved_data": None}


@pytest.fixture
def context(tmp_path: Path) -> ControlContext:
    tasks = load_tasks(write_tasks(tmp_path))
    site_map = SiteMap.from_dict({"environments": {"__SHOPPING__": {"urls": [SHOP]}}})
    settings = RunSettings(site_map, output_dir=tmp_path / "out", journal_dir=tmp_path / "journal")
    ctx = ControlContext(tasks=tasks, sessions=SessionStore(settings))
    # A running session with two events, a finished one, an idle one, an empty running one.
    for name, task in (("runner", NAVIGATE_TASK), ("done", NAVIGATE_TASK), ("empty", MUTATE_TASK)):
        assert call(ctx, "POST", "/sessions", {"task_id": task, "session": name})[0] == 200
    visit(ctx, "runner", "/")
    visit(ctx, "runner", "/products/7")
    visit(ctx, "done", "/products/7")
    visit(ctx, "idle", "/x")
    assert call(ctx, "POST", "/sessions/done/finish", NAVIGATE_DONE)[0] == 200
    return ctx


def visit(ctx: ControlContext, session: str, path: str) -> None:
    event = event_from_flow(make_flow(url=f"{SHOP}{path}", headers=browser_headers(navigate=True)))
    ctx.sessions.get_or_create(session).append(event)


def snapshot(ctx: ControlContext, tmp_path: Path) -> Any:
    """Everything a request could change: each session's state, trace and verdict, and every file."""
    sessions = {}
    for session in ctx.sessions:
        view = session.describe()
        events = [(e.method, e.url, e.status) for e in session.trace]
        started = session.attempt.started
        sessions[session.name] = (view["state"], view["task_id"], events, view.get("result"), started)
    files = {
        str(path.relative_to(tmp_path)): path.read_bytes()
        for path in sorted(tmp_path.rglob("*"))
        if path.is_file()
    }
    return sessions, files


START = "/sessions"
RUNNER = "/sessions/runner/finish"

BAD_REQUESTS: list[tuple[str, str, str, Any, dict[str, str], int, str]] = [
    # (label, method, target, body, headers, status, error)
    ("start: not JSON", "POST", START, b"{task_id: 1", {}, 400, "bad_json"),
    ("start: not UTF-8", "POST", START, b"\xff\xfe{}", {}, 400, "bad_json"),
    ("start: empty body", "POST", START, b"", {}, 400, "bad_json"),
    ("start: a list", "POST", START, [9001], {}, 400, "bad_request"),
    ("start: a string", "POST", START, "9001", {}, 400, "bad_request"),
    ("start: null", "POST", START, None, {}, 400, "bad_request"),
    ("start: missing task_id", "POST", START, {"session": "runner"}, {}, 400, "bad_request"),
    ("start: task_id a string", "POST", START, {"task_id": "9001"}, {}, 400, "bad_request"),
    ("start: task_id a float", "POST", START, {"task_id": 9001.5}, {}, 400, "bad_request"),
    ("start: task_id a bool", "POST", START, {"task_id": True}, {}, 400, "bad_request"),
    ("start: session a number", "POST", START, {"task_id": 9001, "session": 7}, {}, 400, "bad_request"),
    (
        "start: resume not a bool",
        "POST",
        START,
        {"task_id": 9001, "resume_journal": "yes"},
        {},
        400,
        "bad_request",
    ),
    ("start: unknown field", "POST", START, {"task_id": 9001, "sesion": "x"}, {}, 400, "bad_request"),
    ("start: unknown task", "POST", START, {"task_id": 4242, "session": "runner"}, {}, 404, "unknown_task"),
    ("start: huge task id", "POST", START, {"task_id": 10**40, "session": "runner"}, {}, 404, "unknown_task"),
    ("start: empty name", "POST", START, {"task_id": 9001, "session": ""}, {}, 400, "bad_session_name"),
    ("start: long name", "POST", START, {"task_id": 9001, "session": "x" * 129}, {}, 400, "bad_session_name"),
    (
        "start: control char",
        "POST",
        START,
        {"task_id": 9001, "session": "a\x00b"},
        {},
        400,
        "bad_session_name",
    ),
    (
        "start: no journal",
        "POST",
        START,
        {"task_id": MUTATE_TASK, "session": "runner", "resume_journal": True},
        {},
        404,
        "no_journal",
    ),
    ("start: GET-only verb", "DELETE", START, b"", {}, 405, "method_not_allowed"),
    ("finish: unknown session", "POST", "/sessions/nobody/finish", NAVIGATE_DONE, {}, 404, "unknown_session"),
    ("finish: not JSON", "POST", RUNNER, b"{'task_type': 'navigate'}", {}, 400, "bad_json"),
    ("finish: empty body", "POST", RUNNER, b"   ", {}, 400, "bad_json"),
    ("finish: not UTF-8", "POST", RUNNER, b"\xc3\x28", {}, 400, "bad_json"),
    (
        "finish: again, another answer",
        "POST",
        "/sessions/done/finish",
        {**NAVIGATE_DONE, "status": "FAILURE"},
        {},
        409,
        "different_answer",
    ),
    ("finish: no events", "POST", "/sessions/empty/finish", NAVIGATE_DONE, {}, 409, "no_events"),
    ("finish: no task", "POST", "/sessions/idle/finish", NAVIGATE_DONE, {}, 409, "no_task"),
    ("finish: GET", "GET", RUNNER, b"", {}, 405, "method_not_allowed"),
    (
        "finish: from a page (Origin)",
        "POST",
        RUNNER,
        NAVIGATE_DONE,
        {"origin": "http://evil.test"},
        403,
        "page_request_refused",
    ),
    (
        "finish: from a page (null Origin)",
        "POST",
        RUNNER,
        NAVIGATE_DONE,
        {"origin": "null"},
        403,
        "page_request_refused",
    ),
    (
        "finish: cross-site fetch",
        "POST",
        RUNNER,
        NAVIGATE_DONE,
        {"sec-fetch-site": "cross-site", "sec-fetch-mode": "no-cors"},
        403,
        "page_request_refused",
    ),
    (
        "finish: same-site form",
        "POST",
        RUNNER,
        NAVIGATE_DONE,
        {"sec-fetch-site": "same-site", "sec-fetch-mode": "navigate"},
        403,
        "page_request_refused",
    ),
    (
        "finish: cors mode",
        "POST",
        RUNNER,
        NAVIGATE_DONE,
        {"sec-fetch-dest": "empty", "sec-fetch-mode": "cors"},
        403,
        "page_request_refused",
    ),
    (
        "start: from a page",
        "POST",
        START,
        {"task_id": 9001, "session": "runner"},
        {"origin": "http://evil.test", "sec-fetch-site": "cross-site"},
        403,
        "page_request_refused",
    ),
    (
        "trace: from a page",
        "GET",
        "/sessions/runner/trace",
        b"",
        {"sec-fetch-site": "cross-site"},
        403,
        "page_request_refused",
    ),
    ("preflight", "OPTIONS", RUNNER, b"", {"origin": "http://evil.test"}, 403, "page_request_refused"),
    ("preflight without origin", "OPTIONS", RUNNER, b"", {}, 405, "method_not_allowed"),
    ("oversized finish", "POST", RUNNER, b" " * (MAX_CONTROL_BODY + 1), {}, 413, "too_large"),
    ("oversized start", "POST", START, b"[" * (MAX_CONTROL_BODY + 1), {}, 413, "too_large"),
    ("deeply nested finish", "POST", RUNNER, b"[" * 100_000 + b"]" * 100_000, {}, 400, "bad_json"),
    ("nested finish past the cap", "POST", RUNNER, b"[" * 65 + b"]" * 65, {}, 400, "bad_json"),
    ("nested fenced finish", "POST", RUNNER, b"```json\n" + b"[" * 5000 + b"\n```", {}, 400, "bad_json"),
    ("deeply nested start", "POST", START, b'{"a":' * 50_000 + b"1" + b"}" * 50_000, {}, 400, "bad_json"),
    ("session: unknown", "GET", "/sessions/nobody", b"", {}, 404, "unknown_session"),
    ("session: POST", "POST", "/sessions/runner", b"{}", {}, 405, "method_not_allowed"),
    ("trace: unknown", "GET", "/sessions/nobody/trace", b"", {}, 404, "unknown_session"),
    ("trace: since not a number", "GET", "/sessions/runner/trace?since=abc", b"", {}, 400, "bad_request"),
    ("events: since not a number", "GET", "/sessions/runner/events?since=1e3", b"", {}, 400, "bad_request"),
    ("events: unknown", "GET", "/sessions/nobody/events", b"", {}, 404, "unknown_session"),
    ("har: unknown", "GET", "/sessions/nobody/har", b"", {}, 404, "unknown_session"),
    ("har: POST", "POST", "/sessions/runner/har", b"{}", {}, 405, "method_not_allowed"),
    ("task: not a number", "GET", "/tasks/abc", b"", {}, 400, "bad_request"),
    ("task: unknown", "GET", "/tasks/1", b"", {}, 404, "unknown_task"),
    ("tasks: POST", "POST", "/tasks", b"{}", {}, 405, "method_not_allowed"),
    ("health: POST", "POST", "/health", b"{}", {}, 405, "method_not_allowed"),
    ("openapi: POST", "POST", "/openapi.json", b"{}", {}, 405, "method_not_allowed"),
    ("no such route", "GET", "/sessions/runner/finish/now", b"", {}, 404, "not_found"),
    ("root: POST", "POST", "/", b"{}", {}, 405, "method_not_allowed"),  # GET / is the dashboard page
    ("dashboard: no such file", "GET", "/dashboard/secrets.py", b"", {}, 404, "not_found"),
    ("path traversal", "GET", "/sessions/..%2F..%2Fetc/har", b"", {}, 404, "unknown_session"),
]


@pytest.mark.parametrize(
    ("method", "target", "body", "headers", "status", "error"),
    [case[1:] for case in BAD_REQUESTS],
    ids=[case[0] for case in BAD_REQUESTS],
)
def test_bad_requests_get_a_4xx_json_error_and_change_nothing(
    context, tmp_path, method, target, body, headers, status, error
):
    before = snapshot(context, tmp_path)
    got_status, got = call(context, method, target, body, headers=headers)
    assert (got_status, got["error"]) == (status, error), got
    assert got["detail"], "the error names the problem"
    assert snapshot(context, tmp_path) == before
    # ... and the control API goes on serving: the running session still finishes normally.
    assert call(context, "POST", RUNNER, NAVIGATE_DONE)[1]["status"] == "success"


def test_token_guards_every_route_but_the_public_ones(context, tmp_path):
    context.token = "s3cret"
    before = snapshot(context, tmp_path)
    for method, target in (
        ("GET", "/tasks"),
        ("GET", "/sessions"),
        ("GET", "/sessions/runner/har"),
        ("POST", "/sessions"),
        ("POST", RUNNER),
    ):
        for authorization in (None, "Bearer wrong", "Basic czNjcmV0", "Bearer", "bearer s3cret-and-more"):
            body = {"task_id": NAVIGATE_TASK, "session": "runner"} if target == "/sessions" else NAVIGATE_DONE
            status, got = call(context, method, target, body, authorization=authorization)
            assert (status, got["error"]) == (401, "unauthorized"), (method, target, authorization)
    assert snapshot(context, tmp_path) == before
    assert call(context, "GET", "/health")[0] == 200
    assert call(context, "GET", "/openapi.json")[0] == 200
    assert call(context, "POST", RUNNER, NAVIGATE_DONE, authorization="bearer s3cret")[0] == 200


def test_harness_clients_are_not_mistaken_for_pages(context):
    """requests/curl send no browser marks; Node's fetch sends Sec-Fetch-Mode alone; a user at the
    address bar sends Sec-Fetch-Site: none."""
    assert call(context, "GET", "/sessions/runner", headers={"sec-fetch-site": "none"})[0] == 200
    node = {"sec-fetch-mode": "cors", "accept": "*/*", "user-agent": "node"}
    assert call(context, "POST", RUNNER, NAVIGATE_DONE, headers=node)[0] == 200


def test_resume_from_the_journal_restores_the_trace_in_a_new_store(context, tmp_path):
    """What a restarted proxy does: a new store on the same journal directory picks the run up."""
    journal = context.sessions.get_or_create("runner").attempt.journal
    assert journal is not None and journal.lines == 2
    restarted = ControlContext(tasks=context.tasks, sessions=SessionStore(context.settings))
    body = {"task_id": NAVIGATE_TASK, "session": "runner", "resume_journal": True}
    status, started = call(restarted, "POST", "/sessions", body)
    assert status == 200 and started["resumed_events"] == 2 and started["state"] == "running"
    trace = restarted.sessions.get_or_create("runner").trace
    assert [event.url for event in trace] == [f"{SHOP}/", f"{SHOP}/products/7"]
    assert call(restarted, "POST", RUNNER, NAVIGATE_DONE)[1]["status"] == "success"
    # The same session on another task has no journal to resume.
    status, got = call(restarted, "POST", "/sessions", {**body, "task_id": MUTATE_TASK})
    assert (status, got["error"]) == (404, "no_journal")


def test_openapi_document_lists_every_route_and_is_served(context):
    status, document = call(context, "GET", "/openapi.json")
    assert status == 200 and document == openapi_document()
    assert document["openapi"].startswith("3.")
    paths = set(document["paths"])
    assert paths == {
        "/health",
        "/mutations",
        "/openapi.json",
        "/tasks",
        "/tasks/{task_id}",
        "/sessions",
        "/sessions/{session}",
        "/sessions/{session}/trace",
        "/sessions/{session}/events",
        "/sessions/{session}/finish",
        "/sessions/{session}/har",
        "/sessions/{session}/progress",
        "/sessions/{session}/preview",
        "/sessions/{session}/proxy.pac",
        "/sessions/{session}/abandon",
        "/report",
        "/events",
        "/",
    }
    # Every error status a bad request above produced is documented on its route's operation.
    for _label, method, target, _body, _headers, status, _error in BAD_REQUESTS:
        if method == "OPTIONS" or (status in (404, 405) and _error in ("not_found", "method_not_allowed")):
            continue
        template = _template_of(target.split("?")[0], paths)
        operation = document["paths"][template][method.lower()]
        assert str(status) in operation["responses"], (method, target, status)


def _template_of(path: str, templates: set[str]) -> str:
    parts = path.strip("/").split("/")
    for template in templates:
        pieces = template.strip("/").split("/")
        if len(pieces) == len(parts) and all(
            piece.startswith("{") or piece == part for piece, part in zip(pieces, parts, strict=True)
        ):
            return template
    raise AssertionError(f"no route template for {path}")


@pytest.mark.parametrize("streaming", [False, True], ids=["buffered", "stream_large_bodies=1k"])
def test_control_bodies_through_a_real_proxy(tmp_path, streaming):
    """Through the proxy at the reserved host, with and without mitmproxy streaming large bodies
    (which cannot be answered in place: such requests are handed to the control port)."""
    config = write_config(tmp_path / "sites.json", {"__SHOPPING__": {"urls": [SHOP]}})
    options = ("stream_large_bodies=1k",) if streaming else ()
    proxy = start_proxy(tmp_path / "proxy", tasks=write_tasks(tmp_path), config=config, extra_options=options)
    try:
        proxies = {"http": f"http://carol:x@127.0.0.1:{proxy.port}"}
        reserved = "http://webarena-live.invalid"
        # A small body, then a chunked one of unknown length: both start the caller's session.
        assert requests.post(f"{reserved}/sessions", json={"task_id": 9003}, proxies=proxies, timeout=10).ok
        chunked = requests.post(
            f"{reserved}/sessions", data=iter([b'{"task_id": ', b"9001}"]), proxies=proxies, timeout=10
        )
        assert chunked.status_code == 200 and chunked.json()["session"] == "carol", chunked.text
        # A big final response (50 kB of answer) through the reserved host is evaluated.
        requests.get(f"http://127.0.0.1:{free_port()}/x", proxies=proxies, timeout=10)  # one event (status 0)
        answer = {"task_type": "NAVIGATE", "status": "SUCCESS", "retrieved_data": None, "note": "n" * 50_000}
        finish = requests.post(f"{reserved}/sessions/carol/finish", json=answer, proxies=proxies, timeout=30)
        assert finish.status_code == 200 and finish.json()["status"] in ("failure", "error"), finish.text
        # Over 10 MiB: a JSON 413 through the proxy and on the control port, the proxy still serving.
        huge = b"x" * (MAX_CONTROL_BODY + 1024)
        for url, via in ((f"{reserved}/sessions", proxies), (f"{proxy.control.base}/sessions", None)):
            reply = requests.post(url, data=huge, proxies=via, timeout=60)
            assert reply.status_code == 413 and reply.json()["error"] == "too_large", reply.text[:300]
        assert proxy.control.get("/sessions/carol").json()["state"] == "finished"
        assert [view["session"] for view in proxy.control.get("/sessions").json()["sessions"]] == ["carol"]
    finally:
        proxy.stop()
