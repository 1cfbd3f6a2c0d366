"""The control routes as plain functions over a real task file and real sessions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.addon_helpers import (
    MUTATE_TASK,
    NAVIGATE_TASK,
    RETRIEVE_TASK,
    SHOP,
    oracle_verdict,
)
from tests.support.control_in_process import Reply, call, handle_request, shop_context, visit
from webarena_live.control.bodies import parse_final_response
from webarena_live.control.context import ControlContext
from webarena_live.evaluator import responses
from webarena_live.evaluator.har import load_trace

NAVIGATE_DONE = {"action": "navigate", "status": "SUCCESS", "results": None}


@pytest.fixture
def context(tmp_path) -> ControlContext:
    return shop_context(tmp_path)


def test_health(context):
    status, body = call(context, "GET", "/health")
    assert status == 200
    assert body["status"] == "ok" and body["tasks"] == 3 and body["reference_version"] == "1.2.3"


def test_tasks_are_listed_with_rendered_start_urls_and_no_answers(context):
    status, body = call(context, "GET", "/tasks")
    assert status == 200 and body["count"] == 3
    assert [t["task_id"] for t in body["tasks"]] == [NAVIGATE_TASK, MUTATE_TASK, RETRIEVE_TASK]
    assert body["tasks"][0]["start_urls"] == [f"{SHOP}/"]
    assert all("eval" not in t for t in body["tasks"])
    status, one = call(context, "GET", f"/tasks/{RETRIEVE_TASK}")
    assert status == 200 and one["intent"] == "What is the name of product 7?"
    # The answer's shape, never its values: the schema of `retrieved_data`, the values allowed.
    assert one["results_schema"] == context.tasks[RETRIEVE_TASK].response_config.results_schema
    assert one["answer"]["task_type"] == ["RETRIEVE", "MUTATE", "NAVIGATE"]
    assert "UNKNOWN_ERROR" in one["answer"]["status"] and "expected" not in json.dumps(one)


def test_unknown_and_malformed_task_ids_are_json_errors(context):
    status, body = call(context, "GET", "/tasks/12345")
    assert (status, body["error"]) == (404, "unknown_task") and "12345" in body["detail"]
    status, body = call(context, "GET", "/tasks/seven")
    assert status == 400 and body["error"] == "bad_request"


def test_start_a_session_and_read_it(context):
    status, body = call(context, "POST", "/sessions", {"task_id": NAVIGATE_TASK, "session": "alice"})
    assert status == 200
    assert body == {
        "session": "alice", "state": "running", "task_id": NAVIGATE_TASK,
        "intent": "Open the page of product 7", "start_urls": [f"{SHOP}/"], "sites": ["shopping"],
    }  # fmt: skip
    visit(context, "alice", "/products/7")
    status, body = call(context, "GET", "/sessions/alice")
    assert status == 200 and body["state"] == "running" and body["counts"]["navigation"] == 1
    status, body = call(context, "GET", "/sessions/alice/trace")
    assert [e["url"] for e in body["events"]] == [f"{SHOP}/products/7"] and body["count"] == 1
    status, body = call(context, "GET", "/sessions/alice/trace?since=1")
    assert body["events"] == []


def test_session_name_defaults_to_the_callers_credentials_then_default(context):
    assert call(context, "POST", "/sessions", {"task_id": NAVIGATE_TASK}, caller="bob")[1]["session"] == "bob"
    assert call(context, "POST", "/sessions", {"task_id": NAVIGATE_TASK})[1]["session"] == "default"


@pytest.mark.parametrize(
    ("body", "status", "error"),
    [
        (b"{not json", 400, "bad_json"),
        ({"session": "x"}, 400, "bad_request"),
        ({"task_id": "9001"}, 400, "bad_request"),
        ({"task_id": 9001, "unexpected": 1}, 400, "bad_request"),
        ({"task_id": 404}, 404, "unknown_task"),
        ({"task_id": 9001, "session": "bad\nname"}, 400, "bad_session_name"),
    ],
)
def test_bad_start_requests_change_nothing(context, body, status, error):
    visit(context, "default", "/kept")
    got_status, got = call(context, "POST", "/sessions", body)
    assert (got_status, got["error"]) == (status, error) and "detail" in got
    assert len(context.sessions) == 1 and len(context.sessions.get_or_create("default").trace) == 1


def test_finish_evaluates_writes_outputs_and_matches_the_oracle(context, tmp_path, oracle_python):
    call(context, "POST", "/sessions", {"task_id": NAVIGATE_TASK, "session": "alice"})
    visit(context, "alice", "/")
    visit(context, "alice", "/products/7")
    status, result = call(context, "POST", "/sessions/alice/finish", NAVIGATE_DONE)
    assert status == 200
    assert result["status"] == "success" and result["score"] == 1.0 and result["task_id"] == NAVIGATE_TASK
    task_dir = tmp_path / "out" / str(NAVIGATE_TASK)
    assert json.loads((task_dir / "eval_result.json").read_text()) == {
        k: v
        for k, v in result.items()
        if k not in ("interference", "sites_answered", "unanswered", "site_errors")
    }
    assert result["interference"]["exposed"] is False  # the finish answers it; eval_result.json holds none
    # The seed's names are translated to the official ones for the reference tooling.
    written = json.loads((task_dir / "agent_response.json").read_text())
    assert written["task_type"].upper() == "NAVIGATE" and "action" not in written
    assert len(load_trace(task_dir / "network.har")) == 2
    assert not list(task_dir.glob(".*.tmp"))
    verdict = oracle_verdict(oracle_python, tmp_path / "tasks.json", NAVIGATE_TASK, task_dir)
    assert verdict == {"status": "success", "score": 1.0}


def test_one_page_short_fails_and_the_oracle_agrees(context, tmp_path, oracle_python):
    call(context, "POST", "/sessions", {"task_id": NAVIGATE_TASK})
    visit(context, "default", "/products")
    status, result = call(context, "POST", "/sessions/default/finish", NAVIGATE_DONE)
    assert status == 200 and result["status"] == "failure"
    task_dir = tmp_path / "out" / str(NAVIGATE_TASK)
    verdict = oracle_verdict(oracle_python, tmp_path / "tasks.json", NAVIGATE_TASK, task_dir)
    assert verdict == {"status": "failure", "score": 0.0}


def test_retrieve_answer_inside_a_code_fence(context, tmp_path, oracle_python):
    call(context, "POST", "/sessions", {"task_id": RETRIEVE_TASK})
    visit(context, "default", "/products/7")  # the reference errors on a run with no traffic at all
    answer = 'Here it is:\n```json\n{"action": "retrieve", "status": "success", "results": ["blue mug"]}\n```'
    status, result = call(context, "POST", "/sessions/default/finish", answer.encode())
    assert status == 200 and result["status"] == "success"
    task_dir = tmp_path / "out" / str(RETRIEVE_TASK)
    verdict = oracle_verdict(oracle_python, tmp_path / "tasks.json", RETRIEVE_TASK, task_dir)
    assert verdict["status"] == "success"


@pytest.mark.parametrize(
    ("body", "loads"),
    [
        (b'{"action": "retrieve", "status": "success", "results": ["Blue Mug (one-answer)"]}', 1),
        # Text that is not JSON: one failed attempt tells it from JSON, then its fence is decoded.
        (b'Found it:\n```json\n{"action": "retrieve", "status": "success", "results": '
         b'["Blue Mug (one-answer)"]}\n```', 2),
    ],
)  # fmt: skip
def test_a_finish_reads_the_final_answer_once(context, tmp_path, monkeypatch, body, loads):
    """From the request body to the verdict, the warnings and agent_response.json, the answer is read
    into its document once (`FinalAnswer.read`), and its text parsed as JSON no more than that needs."""
    reads: list[object] = []
    parsed: list[str] = []
    real_document, real_loads = responses._document, json.loads

    def document(raw):
        reads.append(raw)
        return real_document(raw)

    def counting_loads(text, *args, **kwargs):
        if "one-answer" in (text.decode() if isinstance(text, bytes) else str(text)):
            parsed.append(text)
        return real_loads(text, *args, **kwargs)

    call(context, "POST", "/sessions", {"task_id": RETRIEVE_TASK})
    visit(context, "default", "/products/7")
    monkeypatch.setattr(responses, "_document", document)
    monkeypatch.setattr(json, "loads", counting_loads)
    reply = handle_request(context, "POST", "/sessions/default/finish", body)
    monkeypatch.undo()
    result = json.loads(reply.body)
    assert reply.status == 200 and result["status"] == "failure"  # "Blue Mug (one-answer)" is not it
    assert len(reads) == 1 and len(parsed) == loads, (reads, parsed)
    written = json.loads((tmp_path / "out" / str(RETRIEVE_TASK) / "agent_response.json").read_text())
    assert written["retrieved_data"] == ["Blue Mug (one-answer)"]
    assert "one-answer" in json.dumps(result["evaluators_results"][0]["actual"])


def test_finish_errors_change_nothing(context):
    assert call(context, "POST", "/sessions/nobody/finish", NAVIGATE_DONE)[0] == 404
    visit(context, "idle", "/x")
    status, body = call(context, "POST", "/sessions/idle/finish", NAVIGATE_DONE)
    assert (status, body["error"]) == (409, "no_task")
    call(context, "POST", "/sessions", {"task_id": NAVIGATE_TASK, "session": "alice"})
    visit(context, "alice", "/")
    for bad in (b"", b"{oops", b"\xff\xfe"):
        status, body = call(context, "POST", "/sessions/alice/finish", bad)
        assert (status, body["error"]) == (400, "bad_json")
    assert context.sessions.get_or_create("alice").state.value == "running"
    status, first = call(context, "POST", "/sessions/alice/finish", NAVIGATE_DONE)
    assert status == 200
    # The same answer again (as text, keys reordered, spaced): the same result, nothing judged anew.
    same = json.dumps(dict(reversed(NAVIGATE_DONE.items())), indent=4).encode()
    assert call(context, "POST", "/sessions/alice/finish", same) == (200, first)
    status, body = call(context, "POST", "/sessions/alice/finish", {**NAVIGATE_DONE, "status": "FAILURE"})
    assert (status, body["error"]) == (409, "different_answer")
    assert body["detail"]["judged"] == NAVIGATE_DONE
    assert body["detail"]["refused"] == {**NAVIGATE_DONE, "status": "FAILURE"}
    assert call(context, "GET", "/sessions/alice")[1]["result"]["status"] == "failure"


def test_unknown_routes_sessions_and_methods(context):
    assert call(context, "GET", "/sessions/ghost")[0] == 404
    assert call(context, "GET", "/sessions/ghost/trace")[0] == 404
    assert call(context, "GET", "/nope")[1]["error"] == "not_found"
    assert call(context, "DELETE", "/health")[0] == 405
    assert call(context, "GET", "/sessions/x/finish")[0] == 405


def test_session_names_are_url_decoded(context):
    visit(context, "team a/1", "/x")
    status, body = call(context, "GET", "/sessions/team%20a%2F1")
    assert status == 200 and body["session"] == "team a/1"


def test_har_route_returns_a_har_document(context):
    visit(context, "default", "/products/7")
    status, har = call(context, "GET", "/sessions/default/har")
    assert status == 200 and har["log"]["version"] == "1.2"
    assert [entry["request"]["url"] for entry in har["log"]["entries"]] == [f"{SHOP}/products/7"]


def test_events_route_through_the_proxy_is_a_buffered_event_stream(context):
    visit(context, "default", "/a")
    visit(context, "default", "/b")
    reply = handle_request(context, "GET", "/sessions/default/events", b"")
    assert reply.status == 200 and reply.content_type == "text/event-stream"
    messages = [m for m in reply.body.decode().split("\n\n") if m.startswith(("event:", "id:"))]
    assert messages[0].startswith("event: session")
    assert [json.loads(m.split("data: ", 1)[1])["url"] for m in messages[1:]] == [f"{SHOP}/a", f"{SHOP}/b"]
    resumed = handle_request(context, "GET", "/sessions/default/events", b"", last_event_id="0")
    assert b"/a" not in resumed.body and b"/b" in resumed.body


def test_token_protects_everything_but_health(context):
    context.token = "s3cret"
    assert call(context, "GET", "/health")[0] == 200
    assert call(context, "GET", "/tasks")[0] == 401
    assert call(context, "GET", "/tasks", authorization="Bearer s3cret")[0] == 200


def test_cors_preflight_is_refused():
    # No web origin may drive the control API (control/guard.py), so no preflight is granted.
    reply = handle_request(None, "OPTIONS", "/sessions", b"")
    assert isinstance(reply, Reply) and reply.status == 405


def test_parse_final_response():
    assert parse_final_response(b'{"a": 1}') == {"a": 1}
    assert parse_final_response(b'"text"') == "text"
    assert parse_final_response(b"```json\n{}\n```").startswith("```")


def test_outputs_dir_not_needed(context, tmp_path):
    context.sessions.configure(output_dir=None)
    call(context, "POST", "/sessions", {"task_id": NAVIGATE_TASK})
    visit(context, "default", "/products/7")  # a session without events cannot finish (409)
    assert call(context, "POST", "/sessions/default/finish", NAVIGATE_DONE)[0] == 200
    assert not Path(tmp_path / "out").exists()


def test_any_session_name_survives_the_reply_headers(context):
    call(context, "POST", "/sessions", {"task_id": NAVIGATE_TASK, "session": "zoë 1"})
    visit(context, "zoë 1", "/products/7")
    answer = json.dumps(NAVIGATE_DONE).encode()
    reply = handle_request(context, "POST", "/sessions/zo%C3%AB%201/finish", answer)
    assert reply.status == 200
    assert reply.headers["x-webarena-live-session"] == "zo%C3%AB%201"
    assert all(value.isascii() for value in reply.headers.values())


def _attempt(ctx: ControlContext, session: str, answer: object, **start: object) -> tuple[int, object]:
    """A successful navigate attempt."""
    status, _ = call(ctx, "POST", "/sessions", {"task_id": NAVIGATE_TASK, "session": session, **start})
    assert status == 200
    visit(ctx, session, "/products/7")
    return call(ctx, "POST", f"/sessions/{session}/finish", answer)


def test_a_later_attempt_keeps_the_earlier_one(context, tmp_path):
    """No finish replaces another attempt's files: the earlier one moves to OUT/.attempts/<task>/<n>/."""
    out = tmp_path / "out"
    assert _attempt(context, "a", NAVIGATE_DONE)[1]["status"] == "success"
    first = (out / str(NAVIGATE_TASK) / "eval_result.json").read_text()
    reply = handle_request(
        context, "POST", "/sessions", json.dumps({"task_id": NAVIGATE_TASK, "session": "b"}).encode()
    )
    assert reply.status == 200
    visit(context, "b", "/")
    finish = handle_request(context, "POST", "/sessions/b/finish", json.dumps(NAVIGATE_DONE).encode())
    assert json.loads(finish.body)["status"] == "failure"
    kept = out / ".attempts" / str(NAVIGATE_TASK) / "1"
    assert (kept / "eval_result.json").read_text() == first
    assert finish.headers["x-webarena-live-earlier-attempt"] == str(kept).replace(":", "%3A")
    assert json.loads((out / str(NAVIGATE_TASK) / "eval_result.json").read_text())["status"] == "failure"
    assert call(context, "GET", "/sessions/b")[1]["outputs"]["earlier_attempt"] == str(kept)
    # The earlier session says where its files are now, not where they were.
    moved = call(context, "GET", "/sessions/a")[1]["outputs"]
    assert moved == {
        name: str(kept / name)
        for name in ("attempt.json", "agent_response.json", "network.har", "eval_result.json")
    }
    assert all(Path(path).is_file() for path in moved.values())


def test_a_named_run_writes_its_own_run_directory(context, tmp_path):
    status, result = _attempt(context, "a", NAVIGATE_DONE, run="attempt-2")
    assert status == 200 and result["status"] == "success"
    run_dir = tmp_path / "out" / "attempt-2" / str(NAVIGATE_TASK)
    assert sorted(p.name for p in run_dir.iterdir()) == [
        "agent_response.json",
        "attempt.json",
        "eval_result.json",
        "network.har",
    ]
    assert not (tmp_path / "out" / str(NAVIGATE_TASK)).exists()
    assert call(context, "GET", "/sessions/a")[1]["run"] == "attempt-2"
    for bad in ("../x", "123", ""):
        status, body = call(context, "POST", "/sessions", {"task_id": NAVIGATE_TASK, "run": bad})
        assert (status, body["error"]) == (400, "bad_run_name")


def test_starting_a_running_session_with_events_needs_restart(context):
    call(context, "POST", "/sessions", {"task_id": NAVIGATE_TASK, "session": "a"})
    visit(context, "a", "/")
    status, body = call(context, "POST", "/sessions", {"task_id": MUTATE_TASK, "session": "a"})
    assert (status, body["error"]) == (409, "session_running") and '"restart": true' in body["detail"]
    assert len(context.sessions.get_or_create("a").trace) == 1  # the refusal changed nothing
    status, body = call(
        context, "POST", "/sessions", {"task_id": MUTATE_TASK, "session": "a", "restart": True}
    )
    assert status == 200 and len(context.sessions.get_or_create("a").trace) == 0
    # Without events (or once finished) a new start needs no restart flag.
    assert call(context, "POST", "/sessions", {"task_id": NAVIGATE_TASK, "session": "a"})[0] == 200


def test_a_reset_needs_a_reset_url_for_every_site_of_the_task(context):
    status, body = call(
        context, "POST", "/sessions", {"task_id": NAVIGATE_TASK, "session": "r", "reset": True}
    )
    assert (status, body["error"]) == (409, "reset_unavailable") and "__SHOPPING__" in body["detail"]
    assert context.sessions.get("r") is None  # nothing started


def test_the_dashboard_is_served_and_only_its_files(context):
    page = handle_request(context, "GET", "/")
    assert page.status == 200 and page.content_type == "text/html" and b"dashboard/app.js" in page.body
    script = handle_request(context, "GET", "/dashboard/app.js")
    assert script.status == 200 and script.content_type == "text/javascript"
    for name in ("../api.py", "nope.js", ".hidden.css", "index.py"):
        assert handle_request(context, "GET", f"/dashboard/{name}").status == 404, name
