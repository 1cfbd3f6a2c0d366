"""HAR / Playwright trace / journal import and HAR export, on hand-written entries.

Real captures (Chromium, mitmproxy) judged by us and by the oracle are in
tests/evaluator/test_har_real_captures.py.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import pytest

from webarena_live.evaluator.bodies import post_data, response_content
from webarena_live.evaluator.errors import TraceFormatError
from webarena_live.evaluator.har import event_from_har_entry, event_to_har_entry, load_trace

CHROME_ENTRY: dict[str, Any] = {
    "_initiator": {"type": "other"},
    "_priority": "VeryHigh",
    "_resourceType": "document",
    "cache": {},
    "connection": "443",
    "request": {
        "method": "POST",
        "url": "http://127.0.0.1:7770/checkout/cart/add/",
        "httpVersion": "http/1.1",
        "headers": [
            {"name": "Accept", "value": "text/html"},
            {"name": "Content-Type", "value": "application/x-www-form-urlencoded"},
            {"name": "Referer", "value": "http://127.0.0.1:7770/p.html"},
        ],
        "queryString": [],
        "cookies": [],
        "headersSize": 420,
        "bodySize": 17,
        "postData": {
            "mimeType": "application/x-www-form-urlencoded",
            "text": "product=7&qty=2",
            "params": [],
        },
    },
    "response": {
        "status": 302,
        "statusText": "Found",
        "httpVersion": "http/1.1",
        "headers": [{"name": "Location", "value": "http://127.0.0.1:7770/checkout/cart/"}],
        "cookies": [{"name": "mage-messages", "value": "%5B%22added%22%5D", "path": "/", "httpOnly": False}],
        "content": {"size": 0, "mimeType": "x-unknown", "compression": 0},
        "redirectURL": "http://127.0.0.1:7770/checkout/cart/",
        "headersSize": 300,
        "bodySize": 0,
        "_transferSize": 300,
        "_error": None,
    },
    "serverIPAddress": "127.0.0.1",
    "startedDateTime": "2025-03-01T10:00:00.123Z",
    "time": 12.5,
    "timings": {"blocked": 1, "dns": -1, "ssl": -1, "connect": -1, "send": 0.1, "wait": 11, "receive": 0.4},
}


def test_chrome_entry_imports() -> None:
    event = event_from_har_entry(CHROME_ENTRY)
    assert (event.method, event.status, event.referer) == ("POST", 302, "http://127.0.0.1:7770/p.html")
    assert event.redirect_url == "http://127.0.0.1:7770/checkout/cart/"
    assert event.response_cookies == (("mage-messages", "%5B%22added%22%5D"),)
    assert post_data(event) == {"product": "7", "qty": "2"}
    assert event.started == pytest.approx(1740823200.123)
    assert event.duration_ms == 12.5
    assert event.error is None


def test_round_trip_keeps_what_evaluation_reads() -> None:
    event = event_from_har_entry(CHROME_ENTRY)
    again = event_from_har_entry(event_to_har_entry(event))
    for name in (
        "method", "url", "status", "request_headers", "post_data", "post_data_mime", "redirect_url",
        "response_headers", "response_cookies", "response_body", "response_mime", "started", "duration_ms",
    ):  # fmt: skip
        assert getattr(again, name) == getattr(event, name), name


def test_base64_content_is_not_read_as_text() -> None:
    entry = json.loads(json.dumps(CHROME_ENTRY))
    entry["response"]["content"] = {
        "mimeType": "application/json",
        "text": "eyJhIjogMX0=",
        "encoding": "base64",
    }
    assert response_content(event_from_har_entry(entry)) is None
    entry["response"]["content"] = {"mimeType": "application/json", "text": '{"a": 1}'}
    assert response_content(event_from_har_entry(entry)) == {"a": 1}


def test_failed_request_keeps_its_error() -> None:
    entry = json.loads(json.dumps(CHROME_ENTRY))
    entry["response"].update(status=0, _error="net::ERR_CONNECTION_REFUSED")
    event = event_from_har_entry(entry)
    assert event.status == 0 and event.error == "net::ERR_CONNECTION_REFUSED"
    assert event_to_har_entry(event)["_error"] == "net::ERR_CONNECTION_REFUSED"


def _har(entries: list[Any]) -> dict[str, Any]:
    return {"log": {"version": "1.2", "creator": {"name": "t", "version": "1"}, "entries": entries}}


def test_load_trace_formats(tmp_path: Path) -> None:
    har = tmp_path / "network.har"
    har.write_text(json.dumps(_har([CHROME_ENTRY, CHROME_ENTRY])))
    assert len(load_trace(har)) == 2
    as_json = tmp_path / "trace.json"
    as_json.write_text(json.dumps([CHROME_ENTRY]))
    assert len(load_trace(as_json)) == 1
    journal = tmp_path / "events.jsonl"
    journal.write_text(
        json.dumps(CHROME_ENTRY) + "\n\n" + json.dumps(CHROME_ENTRY) + "\n" + '{"request": {"me'
    )
    assert len(load_trace(journal)) == 2  # a line cut short by a crash is dropped
    snapshot_lines = "\n".join(
        json.dumps(item)
        for item in [{"type": "context-options"}, {"type": "resource-snapshot", "snapshot": CHROME_ENTRY}]
    )
    network = tmp_path / "trace.network"
    network.write_text(snapshot_lines)
    assert [e.method for e in load_trace(network)] == ["POST"]
    folder = tmp_path / "trace_dir"
    folder.mkdir()
    (folder / "trace.network").write_text(snapshot_lines)
    assert len(load_trace(folder)) == 1
    one_line = tmp_path / "one.json"
    one_line.write_text(json.dumps({"type": "resource-snapshot", "snapshot": CHROME_ENTRY}))
    assert len(load_trace(one_line)) == 1
    archive = tmp_path / "trace.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("trace.trace", "")
        zf.writestr("trace.network", snapshot_lines)
    assert len(load_trace(archive)) == 1


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{nope", "line 1 is not JSON"),
        (json.dumps({"entries": []}), "no 'log' object"),
        (json.dumps({"log": {}}), "no 'log.entries'"),
        (json.dumps(_har([])), "contains no entries"),
        (json.dumps(_har([{"request": {"url": "http://x"}}, 5])), "entry 1: an entry must be an object"),
    ],
)
def test_broken_traces_name_the_file_and_problem(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "network.har"
    path.write_text(content)
    with pytest.raises(TraceFormatError, match=message) as error:
        load_trace(path)
    assert str(path) in str(error.value)


def test_flawed_entries_are_read_and_their_flaws_kept_for_when_they_are_read(tmp_path: Path) -> None:
    """What the reference loads, we load; a field it would fail to read is a defect of the event.

    (tests/evaluator/test_trace_leniency_parity.py holds the verdicts to the reference's.)
    """
    path = tmp_path / "network.har"
    entries = [
        {"request": {"url": "http://x/a", "method": "GET", "headers": {}}, "response": {"status": "200"}},
        {"request": {"url": "http://x/b", "method": "post"}, "response": {"cookies": None}},
        "not an entry",
    ]
    path.write_text(json.dumps(_har(entries)))
    trace = load_trace(path)
    first, second, third = trace.events
    assert (first.status, first.request_headers, first.defects) == (200, (), None)
    assert second.method == "POST"
    assert second.defects is not None
    assert set(second.defects) == {"method", "headers", "status", "response_cookies"}
    assert second.defects["method"] == "post"
    assert third.defects is not None and "url" in third.defects


def test_missing_and_bad_archives(tmp_path: Path) -> None:
    with pytest.raises(TraceFormatError, match="not found"):
        load_trace(tmp_path / "nothing.har")
    bad = tmp_path / "trace.zip"
    bad.write_text("not a zip")
    with pytest.raises(TraceFormatError, match="not a zip"):
        load_trace(bad)
    empty = tmp_path / "empty.zip"
    with zipfile.ZipFile(empty, "w") as zf:
        zf.writestr("trace.trace", "")
    with pytest.raises(TraceFormatError, match=r"no trace\.network"):
        load_trace(empty)
