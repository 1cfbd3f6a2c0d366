"""The proxy's garbage-collector tuning (`addon/commands/process_memory.py`), alone and in a real proxy.

mitmproxy's finished flows die in reference cycles, so their buffered bodies
wait for Python's cycle collector. The collector here counts the bytes of
large bodies and collects once per `collect_after` of them: the tests build
exactly that kind of garbage (a cycle holding a large body) and watch it go,
then send 1 MB responses through a real proxy and read its `/health`.

The tuning is process-wide policy, so only `webarena-live serve` applies it:
the addon loaded into plain mitmdump leaves the collector as the host set it.
`tests/support/gc_probe.py`, loaded next to the addon, reports what the collector's
settings were after a response and inside a finish.
"""

from __future__ import annotations

import asyncio
import gc
import json
import threading
import weakref
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.site.agents import NAVIGATE_DONE
from tests.site.harness import TASKS_FILE, start_proxy, write_config
from tests.support.paths import SUPPORT
from webarena_live.commands import cli
from webarena_live.commands.process_memory import (
    LARGE_BODY,
    LargeBodyCollector,
    freeze_startup_heap,
    gc_paused,
)

MEGABYTE = 1024 * 1024
PROBE = SUPPORT / "gc_probe.py"


class DeadFlow:
    """Stands for a finished flow: a reference cycle holding a body, freed only by the cycle collector."""

    def __init__(self, size: int) -> None:
        self.body = bytes(size)
        self.me = self


@pytest.fixture
def no_automatic_collection() -> Iterator[None]:
    """Only the collector under test may collect (the automatic one would hide what it does)."""
    with gc_paused():
        yield


def _dead_flow(size: int) -> weakref.ref[DeadFlow]:
    return weakref.ref(DeadFlow(size))


def test_dead_flows_go_once_enough_large_bytes_went_through(no_automatic_collection: None) -> None:
    collector = LargeBodyCollector(collect_after=4 * MEGABYTE)
    dead = [_dead_flow(MEGABYTE) for _ in range(3)]
    for _ in range(3):
        collector.note(MEGABYTE)
    assert all(ref() is not None for ref in dead)  # 3 MB: not yet
    collector.note(MEGABYTE)
    assert all(ref() is None for ref in dead)
    assert collector.stats["large_body_collections"] == 1 and collector.pending == 0


def test_small_bodies_never_count(no_automatic_collection: None) -> None:
    collector = LargeBodyCollector(collect_after=LARGE_BODY)
    dead = _dead_flow(10)
    for _ in range(1000):
        collector.note(LARGE_BODY - 1)
    assert dead() is not None and collector.stats["large_body_collections"] == 0
    gc.collect()


def test_inside_the_proxy_the_collection_waits_for_the_end_of_the_loop_turn(
    no_automatic_collection: None,
) -> None:
    collector = LargeBodyCollector(collect_after=MEGABYTE)

    async def flow_finishes() -> tuple[bool, bool]:
        dead = _dead_flow(MEGABYTE)
        collector.note(MEGABYTE)
        collector.note(MEGABYTE)  # one collection is scheduled, not two
        during = dead() is not None
        await asyncio.sleep(0)
        return during, dead() is None

    assert asyncio.run(flow_finishes()) == (True, True)
    assert collector.stats["large_body_collections"] == 1


def test_freezing_moves_everything_alive_out_of_collections() -> None:
    try:
        frozen = freeze_startup_heap()
        assert frozen == gc.get_freeze_count() > 1000
    finally:
        gc.unfreeze()  # the test process goes on collecting as before


class _LargeAnswers(BaseHTTPRequestHandler):
    body = b'{"rows": "' + b"x" * (MEGABYTE - 12) + b'"}'

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        pass


def _sites(origin: str) -> dict[str, Any]:
    """A site map for the test tasks: the shop at `origin` (the reddit site is never visited)."""
    return {"__SHOPPING__": {"urls": [origin]}, "__REDDIT__": {"urls": ["http://127.0.0.1:9"]}}


@pytest.fixture
def origin() -> Iterator[str]:
    """An upstream answering every GET with 1 MB of JSON."""
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), _LargeAnswers)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{upstream.server_address[1]}"
    upstream.shutdown()


def test_a_real_proxy_collects_after_large_bodies_and_keeps_none_of_them(tmp_path: Path, origin: str) -> None:
    config = write_config(tmp_path / "sites.json", _sites(origin))
    proxy = start_proxy(tmp_path / "proxy", tasks=TASKS_FILE, config=config)
    try:
        proxy.control.start(9001, "big")
        client = requests.Session()
        client.proxies = {"http": f"http://big:x@127.0.0.1:{proxy.port}"}
        for n in range(40):  # 40 MB of bodies: past the 32 MB of one collection
            answer = client.get(f"{origin}/api/report/{n}", timeout=30)
            assert answer.status_code == 200 and len(answer.content) == len(_LargeAnswers.body)
        memory = proxy.control.get("/health").json()["memory"]
        assert memory["frozen_objects"] > 10_000  # the start-up heap: modules, tasks, mitmproxy
        assert memory["large_body_collections"] >= 1
        events = proxy.control.trace("big")
        assert len(events) == 40 and all(event["status"] == 200 for event in events)
        har = proxy.control.get("/sessions/big/har").json()
        assert not any(entry["response"]["content"].get("text") for entry in har["log"]["entries"])
    finally:
        proxy.stop()


def _probed_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, origin: str, **proxy_args: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A proxy with `tests/support/gc_probe.py` loaded: one request through a session, then its finish.
    (`/health`'s answer, the collector's settings the probe saw after the response and inside the finish.)"""
    report = tmp_path / "gc-probe.json"
    monkeypatch.setenv("GC_PROBE_REPORT", str(report))
    config = write_config(tmp_path / "sites.json", _sites(origin))
    proxy = start_proxy(tmp_path / "proxy", tasks=TASKS_FILE, config=config, **proxy_args)
    try:
        proxy.control.start(9001, "probed")
        proxies = {"http": f"http://probed:x@127.0.0.1:{proxy.port}"}
        assert requests.get(f"{origin}/api/report/1", proxies=proxies, timeout=30).status_code == 200
        proxy.control.finish("probed", NAVIGATE_DONE)
        health: dict[str, Any] = proxy.control.get("/health").json()
    finally:
        proxy.stop()
    return health, json.loads(report.read_text())


def _untouched() -> dict[str, Any]:
    """The collector's settings as Python starts: on, nothing frozen, default thresholds."""
    return {"enabled": True, "frozen": 0, "threshold": list(gc.get_threshold())}


def test_the_addon_in_plain_mitmdump_changes_no_process_wide_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, origin: str
) -> None:
    """`mitmdump -s "$(webarena-live addon-path)"`: the host's process, the host's collector."""
    health, seen = _probed_run(
        tmp_path, monkeypatch, origin, plain_mitmdump=True, extra_args=("-s", str(PROBE))
    )
    assert seen == {"response": _untouched(), "finish": _untouched()}
    assert "memory" not in health


def test_serve_freezes_the_start_up_heap_and_keeps_collections_out_of_a_finish(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, origin: str
) -> None:
    health, seen = _probed_run(tmp_path, monkeypatch, origin, extra_options=(f"scripts={PROBE}",))
    assert seen["response"]["enabled"] and seen["response"]["frozen"] > 10_000
    assert seen["finish"]["enabled"] is False
    assert health["memory"]["frozen_objects"] > 10_000


@pytest.mark.parametrize("tuning", [True, False])
def test_the_collector_waits_out_serves_imports_only(monkeypatch: pytest.MonkeyPatch, tuning: bool) -> None:
    """With the tuning on, collections wait while `serve`'s modules load and are back before `serve`
    runs; with `--no-gc-tuning` the collector is left alone."""
    from webarena_live.commands import serve

    calls: list[str] = []
    monkeypatch.setattr(gc, "isenabled", lambda: True)
    monkeypatch.setattr(gc, "disable", lambda: calls.append("disable"))
    monkeypatch.setattr(gc, "enable", lambda: calls.append("enable"))
    monkeypatch.setattr(serve, "run", lambda args: calls.append("run") or 0)
    assert cli.main(["serve", *([] if tuning else ["--no-gc-tuning"])]) == 0
    assert calls == (["disable", "enable", "run"] if tuning else ["run"])


def test_serve_with_no_gc_tuning_leaves_the_collector_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, origin: str
) -> None:
    health, seen = _probed_run(
        tmp_path, monkeypatch, origin, extra_options=(f"scripts={PROBE}",), extra_args=("--no-gc-tuning",)
    )
    assert seen == {"response": _untouched(), "finish": _untouched()}
    assert "memory" not in health
