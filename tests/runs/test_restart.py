"""Stopping and starting `webarena-live serve` again loses track of nothing.

Without `--output-dir` the journal lives in the per-user state directory
(`$XDG_STATE_HOME/webarena-live/journal`), the same for every run of the proxy.
Stopping names each unfinished session and how to resume it; after a restart
`GET /sessions` lists them as resumable, and the body it shows resumes them: the log says
"resumed" with the run's first start, from which the finish's duration counts.
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime
from pathlib import Path

import requests

from tests.support.serve_process import finish, shop, start_serve

__all__ = ["shop"]  # the module's fixture, shared with other tests


def browse(proxy: str, session: str, url: str) -> None:
    proxied = proxy.replace("http://", f"http://{session}:x@")
    assert requests.get(url, proxies={"http": proxied}, headers={"Accept": "text/html"}, timeout=10).ok


def test_unfinished_sessions_are_named_on_stop_and_resumable_after_a_restart(
    tmp_path: Path, shop: str
) -> None:
    state = tmp_path / "state"
    process, control, proxy = start_serve(tmp_path, shop, state)
    try:
        requests.post(
            f"{control}/sessions", json={"task_id": 1003, "session": "kim"}, timeout=10
        ).raise_for_status()
        browse(proxy, "kim", f"{shop}/enamel-camp-mug.html")
        started = requests.get(f"{control}/sessions/kim", timeout=10).json()["started"]
        requests.post(
            f"{control}/sessions", json={"task_id": 1001, "session": "lee"}, timeout=10
        ).raise_for_status()
        browse(proxy, "lee", f"{shop}/")
        done = {"task_type": "retrieve", "status": "SUCCESS", "retrieved_data": [34.99]}
        assert finish(control, "lee", done, timeout=10).ok
        health = requests.get(f"{control}/health", timeout=10).json()
        assert health["journal_dir"] == str(state / "webarena-live" / "journal")
    finally:
        output = process.stop()  # Ctrl-C
    unfinished = [line for line in output.splitlines() if "unfinished:" in line]
    assert len(unfinished) == 1, output
    assert "session kim, task 1003, 1 events" in unfinished[0]
    assert 'POST /sessions {"task_id": 1003, "session": "kim", "resume_journal": true}' in unfinished[0]

    for resumes in (1, 2):  # resumed, stopped unfinished, resumed again: the run keeps its first start
        process, control, proxy = start_serve(tmp_path, shop, state)
        try:
            listed = requests.get(f"{control}/sessions", timeout=10).json()["sessions"]
            assert [(s["session"], s["state"], s["task_id"], s["events"]) for s in listed] == [
                ("kim", "resumable", 1003, 1)
            ]
            resumed = requests.post(f"{control}/sessions", json=listed[0]["resume"], timeout=10).json()
            assert resumed["resumed_events"] == 1
            view = requests.get(f"{control}/sessions/kim", timeout=10).json()
            assert abs(view["started"] - started) < 0.001, (view["started"], started)
            if resumes == 2:
                time.sleep(1)  # the finish's duration counts from the first start, not this resume
                answer = {"task_type": "navigate", "status": "SUCCESS", "retrieved_data": None}
                result = finish(control, "kim", answer, timeout=10).json()
                assert result["status"] == "success", result
                after = requests.get(f"{control}/sessions", timeout=10).json()["sessions"]
                assert [(s["session"], s["state"]) for s in after] == [("kim", "finished")]
        finally:
            output = process.stop()
        first = datetime.fromtimestamp(started, UTC).strftime("%Y-%m-%d %H:%M:%S")
        assert f"session kim resumed: task 1003, started {first} UTC, 1 events from its journal" in output
        assert "session kim started" not in output, output
    took = re.search(r"session kim finished: task 1003 success, score 1, 1 events, ([\d.]+) s", output)
    assert took and float(took[1]) >= time.time() - started - 30 and float(took[1]) > 2, output
    assert "unfinished:" not in output


def test_serve_logs_a_line_per_session_and_quiet_silences_them(tmp_path: Path, shop: str) -> None:
    for extra, expected in (((), True), (("--quiet",), False)):
        process, control, _ = start_serve(tmp_path, shop, tmp_path / "state", *extra)
        try:
            body = {"task_id": 1003, "session": "kim", "restart": True}
            requests.post(f"{control}/sessions", json=body, timeout=10).raise_for_status()
            refused = requests.post(f"{control}/sessions", json={"task_id": 4242}, timeout=10)
            assert refused.status_code == 404
        finally:
            output = process.stop()
        assert "control API" in output  # the banner either way
        lines = ("session kim started: task 1003", "refused POST /sessions: 404 unknown_task")
        assert all((line in output) is expected for line in lines), output
