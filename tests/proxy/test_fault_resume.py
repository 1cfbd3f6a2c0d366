"""Faults made on purpose survive a crash: journaled beside the run's journal (`runs/fault_log.py`), read
back when the run is resumed, and drawn on where the run stopped. The faults file on its own, then a
real `webarena-live serve` killed with SIGKILL mid-run and a second one resuming the session from its
journal, against the same traffic run without a crash."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import requests
from mitmproxy.test import taddons

from tests.proxy.test_addon import configure_with_files, run_flow
from tests.proxy.test_faults import PAGES, PLAN
from tests.support.addon_helpers import NAVIGATE_TASK, SHOP, make_flow
from tests.support.counter_replicas import READ
from tests.support.serve_process import finish, wait_until
from tests.support.site_sessions import browse, read, run_session, serve, site
from webarena_live.proxy.addon import WebArenaLive
from webarena_live.runs.fault_log import (
    FaultLine,
    FaultLog,
    faults_path,
    journaled_faults,
    read_fault_log,
    requests_sent,
)
from webarena_live.runs.sessions import DEFAULT_SESSION

__all__ = ["site"]

TRAFFIC = PAGES[:8] * 3
"""Every page three times: a draw depends on how often its URL was asked before, which a resumed run
must count from its journal."""
CUT = 13
"""Requests before the crash."""
ANSWER = {"task_type": "RETRIEVE", "status": "SUCCESS", "retrieved_data": ["nothing"]}


def line(n: int, url: str = "__SHOPPING__/p/1", seen: int = 0) -> FaultLine:
    record = {"rule": n, "fault": "status", "site": "__SHOPPING__", "method": "GET", "url": url}
    return FaultLine(record, "GET", url, seen)


def test_a_faults_file_reads_back_in_order_without_a_line_a_crash_cut_short(tmp_path: Path) -> None:
    journal = tmp_path / "agent-1-20261129T000000.000000.jsonl"
    assert read_fault_log(journal) == []  # a run that drew no fault has no file
    log = FaultLog(journal)
    lines = [line(0), line(1, "__SHOPPING__/é", seen=2)]
    for fault in lines:
        log.append(fault)
    assert faults_path(journal).name == journal.name + ".faults"
    with faults_path(journal).open("ab") as file:
        file.write(b'{"fault": {"rule": 2, "fau')  # the process died in the middle of a write
    assert read_fault_log(journal) == lines
    resumed = FaultLog(tmp_path / "agent-1-20261129T000000.000001.jsonl")
    resumed.write_resumed(lines)
    assert resumed.path.read_bytes() == faults_path(journal).read_bytes().rsplit(b"\n", 1)[0] + b"\n"


def test_a_damaged_line_is_left_out_with_a_warning_and_the_rest_is_read(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    journal = tmp_path / "agent-1-20261129T000000.000000.jsonl"
    good = line(0).to_line()
    damaged = [
        b"[1, 2]",  # not an object
        b'{"fault": {"rule": 1}, "drawn": {"method": "GET", "url": "u", "seen": 0}}',  # no method, URL, kind
        good.replace(b'"seen":0', b'"seen":"0"'),  # a count that is no number
    ]
    faults_path(journal).write_bytes(good + b"".join(line.rstrip() + b"\n" for line in damaged) + good)
    assert read_fault_log(journal) == [line(0), line(0)]
    told = [r.getMessage() for r in caplog.records]
    assert len(told) == 3 and all(
        f"line {n}: not a fault as journaled" in message for n, message in zip((2, 3, 4), told, strict=True)
    ), told


def test_a_fault_whose_request_the_journal_does_not_hold_is_drawn_again() -> None:
    lines = [line(0, seen=0), line(1, seen=1), line(2, "__SHOPPING__/p/2", seen=0)]
    assert journaled_faults(lines, {("GET", "__SHOPPING__/p/1"): 1}) == lines[:1]
    assert journaled_faults(lines, {("GET", "__SHOPPING__/p/1"): 2, ("GET", "__SHOPPING__/p/2"): 1}) == lines
    assert journaled_faults(lines, {}) == []


def test_a_faults_file_that_cannot_be_written_is_told_once_and_nothing_stops(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocked = tmp_path / "file-not-folder"
    blocked.write_text("")
    log = FaultLog(blocked / "agent-1-20261129T000000.000000.jsonl")
    log.append(line(0))
    log.append(line(1))
    log.write_resumed([line(2)])
    told = [r.getMessage() for r in caplog.records if "faults journal" in r.getMessage()]
    assert len(told) == 1 and told[0].startswith(f"faults journal {log.path} stopped: "), told


def test_a_fresh_attempt_does_not_append_to_a_file_left_at_its_path(tmp_path: Path) -> None:
    journal = tmp_path / "agent-1-20261129T000000.000000.jsonl"
    faults_path(journal).write_bytes(line(7).to_line())  # a crashed run's, never resumed
    log = FaultLog(journal)
    log.append(line(0))
    log.append(line(1))
    assert read_fault_log(journal) == [line(0), line(1)]


def start(control: str, **extra: Any) -> None:
    body = {"task_id": READ, "session": "agent", "run": "agent", **extra}
    reply = requests.post(f"{control}/sessions", json=body, timeout=30)
    assert reply.status_code == 200, reply.text


def test_a_run_resumed_after_a_crash_keeps_its_faults_and_draws_on_where_it_stopped(
    tmp_path: Path, site: str
) -> None:
    faults = tmp_path / "faults.json"
    faults.write_text(json.dumps(PLAN))
    whole = serve(tmp_path / "whole", site, "--faults", str(faults), "--set",
                  f"webarena_journal_dir={tmp_path / 'whole-journal'}")  # fmt: skip
    try:
        calm = run_session(whole, "agent", site, TRAFFIC)
    finally:
        whole.stop()
    made = calm["answer"]["faults_injected"]

    journals, out = tmp_path / "journal", tmp_path / "out"
    flags = ("--faults", str(faults), "--set", f"webarena_journal_dir={journals}", "--output-dir", str(out))
    first = serve(tmp_path / "first", site, *flags)
    try:
        start(first.control)
        seen = browse(first, "agent", site, TRAFFIC[:CUT])
    finally:
        first.process.kill()  # SIGKILL: nothing runs at exit
        first.process.wait(timeout=30)
        first.stop()
    (journal,) = journals.glob("agent-*.jsonl")
    earlier = [fault.record for fault in read_fault_log(journal)]
    assert 0 < len(earlier) < len(made) and earlier == made[: len(earlier)], (earlier, made)
    assert any(f["fault"] == "status" for f in earlier), earlier  # an error answer made before the crash

    second = serve(tmp_path / "second", site, *flags)
    try:
        start(second.control, resume_journal=True)
        seen += browse(second, "agent", site, TRAFFIC[CUT:])
        finished = finish(second.control, "agent", ANSWER)
        assert finished.status_code == 200, finished.text
        after = requests.get(f"{second.control}/sessions/agent", timeout=10).json()
    finally:
        second.stop()
    answer = finished.json()
    assert seen == calm["seen"]  # the agent met the same faults as without the crash
    assert answer["faults_injected"] == made == after["faults_injected"]
    folder = Path(after["outputs"]["eval_result.json"]).parent
    assert read(folder, "attempt.json")["faults_injected"] == made
    # the error answers made on purpose before the crash are still no failure of the site
    assert answer["site_errors"]["count"] == 0 and answer["sites_answered"], answer
    assert answer["status"] == calm["answer"]["status"]


def test_a_fault_cut_off_by_the_crash_is_drawn_again_and_listed_once(tmp_path: Path, site: str) -> None:
    """A latency fault still pausing its request when the proxy dies: its request is not in the journal,
    so the resumed run does not list it; the agent's retry draws it again, listed once."""
    faults = tmp_path / "faults.json"
    slow = {"seed": 5, "rules": [{"path": "^/slow/", "probability": 1, "fault": "latency", "seconds": 2}]}
    faults.write_text(json.dumps(slow))
    journals = tmp_path / "journal"
    flags = ("--faults", str(faults), "--set", f"webarena_journal_dir={journals}")
    first = serve(tmp_path / "first", site, *flags)
    try:
        start(first.control)
        assert browse(first, "agent", site, ["/p/0"]) == ["200"]
        with ThreadPoolExecutor(1) as pool:
            pausing = pool.submit(browse, first, "agent", site, ["/slow/1"])
            wait_until("the fault journaled", lambda: list(journals.glob("agent-*.jsonl.faults")))
            first.process.kill()  # SIGKILL, as above
            first.process.wait(timeout=30)
            assert pausing.result() == ["dropped"]  # the agent saw no answer
    finally:
        first.stop()
    (journal,) = journals.glob("agent-*.jsonl")
    assert [fault.url for fault in read_fault_log(journal)] == ["__SHOPPING__/slow/1"]

    second = serve(tmp_path / "second", site, *flags)
    try:
        start(second.control, resume_journal=True)
        assert browse(second, "agent", site, ["/slow/1"]) == ["200"]  # sent again: paused again
        finished = finish(second.control, "agent", ANSWER)
    finally:
        second.stop()
    assert finished.status_code == 200, finished.text
    listed = finished.json()["faults_injected"]
    assert [(f["fault"], f["url"]) for f in listed] == [("latency", f"{site}/slow/1")], listed


def test_every_journaled_request_is_counted_for_the_draws_and_only_those(tmp_path: Path) -> None:
    """The draws count what the journal will hold, so a resumed run counts what the live one counted: a
    request the proxy answered before the `request` hook (as `--confine` refuses) and one that ended
    before it (its client left mid-body) are counted and never faulted; a replay, never journaled,
    is not counted."""
    plan = tmp_path / "faults.json"
    plan.write_text(json.dumps({"seed": 1, "rules": [{"path": "^/p/", "probability": 1, "fault": "status"}]}))
    addon = WebArenaLive()
    with taddons.context(addon) as tctx:
        configure_with_files(tctx, addon, tmp_path, webarena_faults=str(plan))
        assert addon.context is not None
        addon.context.sessions.start(DEFAULT_SESSION, addon.context.tasks[NAVIGATE_TASK])
        refused = make_flow(url=f"{SHOP}/p/1", status=403)
        answer, refused.response = refused.response, None
        addon.requestheaders(refused)
        refused.response = answer  # the proxy's own answer, given before the `request` hook
        assert addon.request(refused) is None
        addon.response(refused)
        assert refused.response.status_code == 403  # not faulted
        cut = make_flow("POST", f"{SHOP}/p/1", status=None, error="client disconnected")
        addon.requestheaders(cut)
        addon.error(cut)  # mitmproxy calls no `request` hook for it
        replayed = make_flow(url=f"{SHOP}/p/1")
        replayed.is_replay = "request"
        run_flow(addon, replayed)  # counted by nothing: a replay is no event of the trace
        faulted = run_flow(addon, make_flow(url=f"{SHOP}/p/1"))
        assert faulted.response is not None and faulted.response.status_code == 503
        posted = run_flow(addon, make_flow("POST", f"{SHOP}/p/1"))
        assert posted.response is not None and posted.response.status_code == 503
        session = addon.context.sessions.get(DEFAULT_SESSION)
        assert session is not None
        attempt = session.attempt
        assert attempt.journal is not None
        drawn = read_fault_log(attempt.journal.path)
        assert [(fault.method, fault.url, fault.seen) for fault in drawn] == [
            ("GET", "__SHOPPING__/p/1", 1), ("POST", "__SHOPPING__/p/1", 1),
        ]  # fmt: skip
        assert [event.status for event in attempt.trace] == [403, 0, 503, 503]
        assert requests_sent(attempt.trace, addon.context.site_map) == {
            ("GET", "__SHOPPING__/p/1"): 2, ("POST", "__SHOPPING__/p/1"): 2,
        }  # fmt: skip


def test_a_resume_that_keeps_no_fault_removes_a_file_an_earlier_try_left(tmp_path: Path) -> None:
    log = FaultLog(tmp_path / "agent-1-20261129T000000.000001.jsonl")
    log.write_resumed([line(0)])  # a first try of the resume, then a crash before its journal
    assert log.path.is_file()
    FaultLog(log.path.with_name(log.path.name.removesuffix(".faults"))).write_resumed([])
    assert not log.path.exists()
