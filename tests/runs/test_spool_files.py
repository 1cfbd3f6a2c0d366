"""A session that ends without a finish leaves no spool file behind: the spool's file is made only once
its entries fill its buffer (or at the finish), so a closed or abandoned session that captured a few
requests never had one, where a file made at the first event stayed in `OUT/.spool` empty (its
buffer unwritten) as long as the proxy ran. A large spool is a file with its bytes on disk, and a
finish still renames it into place.

`HarSpool` directly on real files, then a real `webarena-live serve` with the demo shop: sessions
browse, one is abandoned, one finishes, and `OUT/.spool` is looked at while it runs.
"""

from __future__ import annotations

import json
from pathlib import Path

import requests

from tests.support.addon_helpers import SHOP, browser_headers, make_flow
from tests.support.serve_process import NAVIGATED, NAVIGATION, finish, shop, start_serve
from webarena_live.evaluator.har import trace_to_har
from webarena_live.evaluator.trace import NetworkEvent, NetworkTrace
from webarena_live.proxy.capture import event_from_flow
from webarena_live.runs.har_spool import SPOOL_BUFFER, SPOOL_SUBDIR, HarSpool
from webarena_live.runs.journal import entry_json_bytes

__all__ = ["shop"]  # a fixture


def _event(index: int) -> NetworkEvent:
    return event_from_flow(make_flow(url=f"{SHOP}/item/{index}", headers=browser_headers(navigate=True)))


def test_a_small_spool_makes_no_file_until_its_finish(tmp_path: Path) -> None:
    folder = tmp_path / SPOOL_SUBDIR
    events = [_event(i) for i in range(3)]
    spool = HarSpool(folder, label="s", redacted=False)
    for event in events:
        spool.add(entry_json_bytes(event))
    assert folder.is_dir() and list(folder.iterdir()) == []  # nothing on disk yet
    target = tmp_path / "network.har"
    assert spool.commit(target, expected_entries=3)
    assert json.loads(target.read_text()) == trace_to_har(NetworkTrace(events))
    assert list(folder.iterdir()) == []
    ended = HarSpool(folder, label="ended", redacted=False)  # a session closed before its finish
    ended.add(entry_json_bytes(events[0]))
    ended.discard()
    assert list(folder.iterdir()) == []


def test_a_large_spool_is_a_file_with_its_bytes_written(tmp_path: Path) -> None:
    folder = tmp_path / SPOOL_SUBDIR
    spool = HarSpool(folder, label="big", redacted=False)
    events, size = [], 0
    while size < 2 * SPOOL_BUFFER:
        events.append(_event(len(events)))
        line = entry_json_bytes(events[-1])
        spool.add(line)
        size += len(line)
    files = list(folder.iterdir())
    assert len(files) == 1 and files[0].stat().st_size >= SPOOL_BUFFER, files
    target = tmp_path / "network.har"
    assert spool.commit(target, expected_entries=len(events))
    assert json.loads(target.read_text()) == trace_to_har(NetworkTrace(events))
    assert list(folder.iterdir()) == []


def test_abandoned_and_finished_sessions_leave_no_spool_file(tmp_path: Path, shop: str) -> None:
    out = tmp_path / "out"
    served, control, _ = start_serve(tmp_path, shop, tmp_path / "state", "--output-dir", str(out))
    try:
        for name in ("left", "answered"):
            started = requests.post(
                f"{control}/sessions", json={"task_id": 1003, "session": name}, timeout=30
            )
            proxy = {"http": started.json()["proxy"]}
            for page in ("/", "/enamel-camp-mug.html"):
                requests.get(f"{shop}{page}", proxies=proxy, headers=NAVIGATION, timeout=10)
        abandoned = requests.post(f"{control}/sessions/left/abandon", json={"reason": "closed"}, timeout=30)
        assert abandoned.status_code == 200, abandoned.text
        assert finish(control, "answered", NAVIGATED).status_code == 200
        spooled = [(p.name, p.stat().st_size) for p in (out / SPOOL_SUBDIR).iterdir()]
        assert spooled == [], spooled  # neither an empty file for the abandoned one nor the finished one's
        assert (out / "1003" / "network.har").is_file()
    finally:
        served.stop()
    assert list((out / SPOOL_SUBDIR).iterdir()) == []
