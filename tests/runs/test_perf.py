"""The performance work: fast serialization, shared headers, the HAR spool, evaluation warm-up.

Each fast path is held to the slow, obviously right one it replaces: the same
JSON, the same timestamps, the same files, the same verdicts (the oracle
judges a spooled `network.har`).
"""

from __future__ import annotations

import asyncio
import gc
import json
import random
import time
from pathlib import Path

import pytest

from tests.support.addon_helpers import (
    MUTATE_TASK,
    NAVIGATE_TASK,
    SHOP,
    browser_headers,
    make_flow,
    oracle_verdict,
    write_tasks,
)
from tests.support.control_in_process import handle_request
from webarena_live.commands.process_memory import gc_paused
from webarena_live.control.context import ControlContext
from webarena_live.evaluator.evaluate import evaluate_task
from webarena_live.evaluator.har import (
    _iso,
    _iso_reference,
    event_to_har_entry,
    event_to_har_json,
    load_trace,
    trace_to_har,
)
from webarena_live.evaluator.sites import SiteMap
from webarena_live.evaluator.tasks import load_tasks
from webarena_live.evaluator.trace import NetworkEvent, NetworkTrace
from webarena_live.proxy import capture
from webarena_live.proxy.capture import event_from_flow, shared_header
from webarena_live.runs.har_spool import SPOOL_SUBDIR, HarSpool, replace_cheaply
from webarena_live.runs.journal import entry_json_bytes
from webarena_live.runs.redact import redact_har_entry
from webarena_live.runs.sessions import SessionState, SessionStore
from webarena_live.runs.settings import RunSettings

MUTATE_DONE = {"task_type": "mutate", "status": "SUCCESS", "retrieved_data": None}
NAVIGATE_DONE = {"task_type": "navigate", "status": "SUCCESS", "retrieved_data": None}


def _events() -> list[NetworkEvent]:
    return [
        event_from_flow(make_flow(url=f"{SHOP}/", headers=browser_headers(navigate=True))),
        event_from_flow(
            make_flow(
                "POST",
                f"{SHOP}/cart/add?x=1&y=&z=%C3%A9",
                headers={"Content-Type": "application/x-www-form-urlencoded", "Cookie": "sid=1"},
                body=b"sku=A7&qty=2&note=caf%C3%A9",
                status=302,
                response_headers=[(b"Location", b"/cart"), (b"Set-Cookie", b"cart=7; Path=/")],
            )
        ),
        event_from_flow(
            make_flow(
                url=f"{SHOP}/api/items.json",
                headers=[(b"Accept", b"application/json"), (b"X-Odd", b"\xff\xfe bytes")],
                response_headers={"Content-Type": "application/json; charset=utf-8"},
                response_body='{"name": "Blue Mug \u2615", "quote": "\\"x\\"\\n"}'.encode(),
            )
        ),
        event_from_flow(make_flow(url=f"{SHOP}/down", status=None, error="connection refused")),
        NetworkEvent(method="get", url="http://x.test/a?b=1", status=200, duration_ms=0, started=0.0),
        NetworkEvent(
            method="GET", url="http://x.test/", status=204, duration_ms=1e-7, started=1.7e9 + 0.9999996
        ),
    ]


def test_har_json_is_the_har_entry_as_compact_ascii_json():
    for event in _events():
        text = event_to_har_json(event)
        assert text.isascii() and "\n" not in text
        assert json.loads(text) == event_to_har_entry(event)
        # Key order too: a journal line reads the same whichever way it was written.
        assert list(json.loads(text)) == list(event_to_har_entry(event))


def test_lone_surrogates_from_undecodable_header_bytes_survive_the_round_trip():
    event = _events()[2]
    assert any("\udcff" in value for _, value in event.request_headers)
    again = load_trace_from_line(event_to_har_json(event))
    assert again.request_headers == event.request_headers


def load_trace_from_line(line: str) -> NetworkEvent:
    from webarena_live.evaluator.har import event_from_har_entry

    return event_from_har_entry(json.loads(line))


def test_fast_timestamps_equal_datetimes_own():
    randomly = random.Random(5)
    values = [0.0, 0.0005, 0.0004999, 0.9999995, 0.99999949, 1.5, 1_700_000_000.0, 1_700_000_000.9999996]
    values += [randomly.uniform(0, 4e9) for _ in range(20_000)]
    values += [round(randomly.uniform(1.6e9, 1.9e9), 3) for _ in range(20_000)]
    values += [round(randomly.uniform(1.6e9, 1.9e9), 6) for _ in range(20_000)]
    assert [v for v in values if _iso(v) != _iso_reference(v)] == []


def test_headers_are_decoded_once_and_shared_between_events():
    flows = [make_flow(url=f"{SHOP}/p/{i}", headers=browser_headers(navigate=True)) for i in range(3)]
    events = [event_from_flow(flow) for flow in flows]
    for left, right in zip(events[0].request_headers, events[1].request_headers, strict=True):
        assert left is right  # the same pair object, not just an equal one
    assert events[0].request_headers == tuple(
        (name.decode(), value.decode()) for name, value in flows[2].request.headers.fields
    )
    assert shared_header((b"X-A", b"\xff")) == ("X-A", "\udcff")


def test_the_shared_header_memory_is_bounded(monkeypatch):
    monkeypatch.setattr(capture._shared_headers, "limit", 10)
    for i in range(50):
        assert shared_header((b"X-Counter", str(i).encode())) == ("X-Counter", str(i))
        assert len(capture._shared_headers) <= 10


def test_proxy_credentials_never_reach_an_event():
    flow = make_flow(headers={"Proxy-Authorization": "Basic YTpi", "Accept": "*/*"})
    names = [name.lower() for name, _ in event_from_flow(flow).request_headers]
    assert "accept" in names and "proxy-authorization" not in names


def test_journal_line_uses_the_filter_when_there_is_one():
    event = _events()[1]
    plain = json.loads(entry_json_bytes(event))
    redacted = json.loads(entry_json_bytes(event, redact_har_entry))
    assert plain == event_to_har_entry(event)
    assert redacted == redact_har_entry(event_to_har_entry(event)) and redacted != plain


# --- the HAR spool -------------------------------------------------------------------------------


def test_a_committed_spool_is_the_har_of_the_trace(tmp_path):
    events = _events()
    spool = HarSpool(tmp_path / SPOOL_SUBDIR, label="s", redacted=False)
    for event in events:
        spool.add(entry_json_bytes(event))
    target = tmp_path / "network.har"
    assert spool.commit(target, expected_entries=len(events))
    assert json.loads(target.read_text()) == trace_to_har(NetworkTrace(events))
    assert list((tmp_path / SPOOL_SUBDIR).iterdir()) == []


def test_a_spool_that_missed_an_event_is_not_committed(tmp_path):
    spool = HarSpool(tmp_path, label="s", redacted=False)
    spool.add(entry_json_bytes(_events()[0]))
    target = tmp_path / "network.har"
    assert not spool.commit(target, expected_entries=2)
    assert not target.exists() and list(tmp_path.iterdir()) == []


def test_an_unwritable_spool_gives_up_quietly(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    spool = HarSpool(blocker / "spool", label="s", redacted=False)
    spool.add(b"{}")
    assert not spool.usable and not spool.commit(tmp_path / "x.har", expected_entries=1)


def test_replacing_a_large_file_is_atomic_and_the_old_one_goes_later(tmp_path):
    target, source = tmp_path / "network.har", tmp_path / "new"
    target.write_bytes(b"old" * 1000)
    source.write_bytes(b"new")
    replace_cheaply(source, target)
    assert target.read_bytes() == b"new"
    deadline = time.monotonic() + 10
    while len(list(tmp_path.iterdir())) > 1 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["network.har"]
    fresh = tmp_path / "fresh"
    fresh.write_bytes(b"1")
    replace_cheaply(fresh, tmp_path / "first.har")  # nothing to replace: a plain rename
    assert (tmp_path / "first.har").read_bytes() == b"1"


@pytest.fixture
def context(tmp_path) -> ControlContext:
    tasks = load_tasks(write_tasks(tmp_path))
    site_map = SiteMap.from_dict({"environments": {"__SHOPPING__": {"urls": [SHOP]}}})
    settings = RunSettings(site_map, output_dir=tmp_path / "out", journal_dir=tmp_path / "journal")
    return ControlContext(tasks=tasks, sessions=SessionStore(settings))


def _finish(ctx: ControlContext, session: str, answer: dict) -> dict:
    reply = handle_request(ctx, "POST", f"/sessions/{session}/finish", json.dumps(answer).encode())
    assert reply.status == 200, reply.body
    timing = reply.headers["server-timing"]
    assert timing.startswith("evaluate;dur=") and ", total;dur=" in timing
    return json.loads(reply.body)


def test_finish_renames_the_spool_into_place_and_the_oracle_agrees(context, tmp_path, oracle_python):
    handle_request(
        context, "POST", "/sessions", json.dumps({"task_id": NAVIGATE_TASK, "session": "a"}).encode()
    )
    session = context.sessions.get_or_create("a")
    for path in ("/", "/static/app.js", "/products/7"):
        session.append(
            event_from_flow(make_flow(url=f"{SHOP}{path}", headers=browser_headers(navigate=True)))
        )
    spool = session.attempt.har_spool
    assert spool is not None and spool.usable and spool.entries == 3  # its file is made at the finish
    result = _finish(context, "a", NAVIGATE_DONE)
    assert result["status"] == "success"
    task_dir = tmp_path / "out" / str(NAVIGATE_TASK)
    assert json.loads((task_dir / "network.har").read_text()) == trace_to_har(session.trace)
    assert list((tmp_path / "out" / SPOOL_SUBDIR).iterdir()) == [] and session.attempt.har_spool is None
    assert oracle_verdict(oracle_python, tmp_path / "tasks.json", NAVIGATE_TASK, task_dir) == {
        "status": "success",
        "score": 1.0,
    }


def test_a_restart_drops_the_old_spool_and_a_redaction_mismatch_falls_back(context, tmp_path):
    start = json.dumps({"task_id": NAVIGATE_TASK, "session": "b", "restart": True}).encode()
    handle_request(context, "POST", "/sessions", start)
    session = context.sessions.get_or_create("b")
    session.append(event_from_flow(make_flow(url=f"{SHOP}/", headers=browser_headers(navigate=True))))
    handle_request(context, "POST", "/sessions", start)  # restart: a fresh, empty spool
    assert len(list((tmp_path / "out" / SPOOL_SUBDIR).iterdir())) == 0
    session.append(
        event_from_flow(make_flow(url=f"{SHOP}/products/7", headers=browser_headers(navigate=True)))
    )
    context.sessions.configure(redact=True)  # the spool holds unredacted entries: the finish must not use it
    _finish(context, "b", NAVIGATE_DONE)
    har = json.loads((tmp_path / "out" / str(NAVIGATE_TASK) / "network.har").read_text())
    assert [e["request"]["url"] for e in har["log"]["entries"]] == [f"{SHOP}/products/7"]
    assert list((tmp_path / "out" / SPOOL_SUBDIR).iterdir()) == []


def test_sessions_without_an_output_dir_spool_nothing(tmp_path):
    task = load_tasks(write_tasks(tmp_path))[NAVIGATE_TASK]
    session = SessionStore(RunSettings(journal_dir=tmp_path / "journal")).start("c", task)
    session.append(event_from_flow(make_flow(url=f"{SHOP}/")))
    attempt = session.attempt
    assert attempt.har_spool is None and attempt.journal is not None and attempt.journal.lines == 1


# --- evaluation prepared while the session runs -----------------------------------------------------


def _mutate_events() -> list[NetworkEvent]:
    events = []
    for i in range(40):
        events.append(event_from_flow(make_flow(url=f"{SHOP}/p/{i}", headers=browser_headers(navigate=True))))
        body = f"sku=B{i}&qty=1".encode()
        form = {"Content-Type": "application/x-www-form-urlencoded"}
        events.append(
            event_from_flow(make_flow("POST", f"{SHOP}/cart/add", headers=form, body=body, status=302))
        )
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    events.append(event_from_flow(make_flow("POST", f"{SHOP}/cart/add", headers=form, body=b"sku=A7&qty=2",
                                            status=302)))  # fmt: skip
    return events


def test_events_are_scanned_while_the_session_runs_and_the_verdict_is_unchanged(context, tmp_path):
    events = _mutate_events()

    async def run() -> None:
        handle_request(
            context, "POST", "/sessions", json.dumps({"task_id": MUTATE_TASK, "session": "m"}).encode()
        )
        session = context.sessions.get_or_create("m")
        for event in events:
            session.append(event)
        assert session.attempt._prepare_timer is not None  # one timer for the whole burst
        await asyncio.sleep(0.3)
        assert session.attempt._prepare_timer is None
        scanned = [value for key, value in session.trace.memo.items() if isinstance(value, tuple)]
        assert scanned and all(count == len(events) for count, _found in scanned)

    asyncio.run(run())
    session = context.sessions.get_or_create("m")
    live = _finish(context, "m", MUTATE_DONE)
    cold = evaluate_task(
        context.tasks[MUTATE_TASK], MUTATE_DONE, NetworkTrace(events), site_map=context.site_map
    )
    assert live["status"] == cold.status.value == "success"
    assert live["evaluators_results"] == cold.to_dict()["evaluators_results"]
    assert session.state is SessionState.FINISHED


def test_no_warm_up_outside_an_event_loop_and_none_after_the_finish(context):
    handle_request(
        context, "POST", "/sessions", json.dumps({"task_id": MUTATE_TASK, "session": "n"}).encode()
    )
    session = context.sessions.get_or_create("n")
    session.append(_mutate_events()[-1])
    assert session.attempt._prepare_timer is None
    _finish(context, "n", MUTATE_DONE)
    session.attempt.prepare_evaluation()  # a late timer on a finished session does nothing
    assert session.state is SessionState.FINISHED


def test_gc_is_paused_only_inside_the_window():
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # a caller's own setting is left alone
    finally:
        gc.enable()


def test_journal_lines_read_back_as_the_same_events(tmp_path):
    task = load_tasks(write_tasks(tmp_path))[NAVIGATE_TASK]
    session = SessionStore(RunSettings(journal_dir=tmp_path / "journal")).start("j", task)
    events = _events()
    for event in events:
        session.append(event)
    assert session.attempt.journal is not None
    again = load_trace(Path(session.attempt.journal.path))
    assert [event_to_har_entry(e) for e in again] == [event_to_har_entry(e) for e in events]


def test_replacing_without_an_atomic_exchange_falls_back_to_a_hard_link(tmp_path, monkeypatch):
    from webarena_live.runs import har_spool

    monkeypatch.setattr(har_spool, "_exchange", lambda source, target: False)
    target, source = tmp_path / "network.har", tmp_path / "new"
    target.write_bytes(b"old")
    source.write_bytes(b"new")
    replace_cheaply(source, target)
    assert target.read_bytes() == b"new" and not source.exists()
    deadline = time.monotonic() + 10
    while list(tmp_path.glob(".network.har.*.old")) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["network.har"]
