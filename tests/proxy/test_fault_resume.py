"""Faults made on purpose survive a crash: journaled beside the run's journal (`runs/fault_log.py`), read
back when the run is resumed, and drawn on where the run stopped. The faults file on its own, then a
real `webarena-live serve` killed with SIGKILL mid-run and a second one resuming the session from its
journal, against the same traffic run without a crash."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.proxy.test_faults import PAGES, PLAN
from tests.support.counter_replicas import READ
from tests.support.serve_process import finish
from tests.support.site_sessions import browse, read, run_session, serve, site
from webarena_live.runs.fault_log import FaultLog, FaultLogError, faults_path, read_fault_log

__all__ = ["site"]

TRAFFIC = PAGES[:8] * 3
"""Every page three times: a draw depends on how often its URL was asked before, which a resumed run
must count from its journal."""
CUT = 13
"""Requests before the crash."""
ANSWER = {"task_type": "RETRIEVE", "status": "SUCCESS", "retrieved_data": ["nothing"]}


def test_a_faults_file_reads_back_in_order_without_a_line_a_crash_cut_short(tmp_path: Path) -> None:
    journal = tmp_path / "agent-1-20261129T000000.000000.jsonl"
    assert read_fault_log(journal) == []  # a run that drew no fault has no file
    log = FaultLog(journal)
    records = [
        {"rule": 0, "fault": "status", "url": "http://a/p/1"},
        {"rule": 1, "fault": "drop", "url": "é"},
    ]
    for record in records:
        log.append(record)
    assert faults_path(journal).name == journal.name + ".faults"
    with faults_path(journal).open("ab") as file:
        file.write(b'{"rule": 2, "fau')  # the process died in the middle of a write
    assert read_fault_log(journal) == records
    resumed = FaultLog(tmp_path / "agent-1-20261129T000000.000001.jsonl")
    resumed.write_resumed(records)
    assert read_fault_log(resumed.path.with_name(resumed.path.name.removesuffix(".faults"))) == records
    faults_path(journal).write_bytes(b'{"rule": 0}\n[1, 2]\n{"rule": 1}\n')
    with pytest.raises(FaultLogError, match=r"line 2: not a JSON object"):
        read_fault_log(journal)


def test_a_faults_file_that_cannot_be_written_is_told_once_and_nothing_stops(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocked = tmp_path / "file-not-folder"
    blocked.write_text("")
    log = FaultLog(blocked / "agent-1-20261129T000000.000000.jsonl")
    log.append({"rule": 0})
    log.append({"rule": 1})
    log.write_resumed([{"rule": 2}])
    told = [r.getMessage() for r in caplog.records if "faults journal" in r.getMessage()]
    assert len(told) == 1 and told[0].startswith(f"faults journal {log.path} stopped: "), told


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
    earlier = read_fault_log(journal)
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
