"""`scripts/hook_profile.py`: py-spy's samples of the proxy put under the addon's hooks by name."""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.site.harness import start_proxy, write_config
from tests.support.addon_helpers import NAVIGATE_TASK, write_tasks

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

from hook_profile import Recording, frame_name, hook_shares, parse_raw, table

RAW = """\
main (webarena_live/commands/cli.py:10);run (asyncio/runners.py:118);Handle._run (asyncio/events.py:80);\
WebArenaLive.response (webarena_live/proxy/addon.py:3);record_from_flow (webarena_live/proxy/capture.py:1) 7
main (webarena_live/commands/cli.py:10);run (asyncio/runners.py:118);Handle._run (asyncio/events.py:80);\
TurnWrites.flush (/work/build/__editable__.x/webarena_live/runs/journal.py:200);\
WebArenaLive._record (webarena_live/proxy/addon.py:345);Journal.write (webarena_live/runs/journal.py:90) 3
main (webarena_live/commands/cli.py:10);run (asyncio/runners.py:118);Handle._run (asyncio/events.py:80);\
handle_hook (mitmproxy/proxy/server.py:363);WebArenaLive.requestheaders (webarena_live/proxy/addon.py:280) 2
main (webarena_live/commands/cli.py:10);run (asyncio/runners.py:118);select (selectors.py:468) 88
"""


def test_samples_go_under_the_hook_the_loop_ran_and_inside_it_under_each_function():
    shares = hook_shares(parse_raw(RAW))
    assert shares.total == 100 and shares.addon == 12  # serve's command line below the loop is no hook
    assert shares.by_hook == {
        "WebArenaLive.response (webarena_live/proxy/addon.py)": 7,
        "TurnWrites.flush (webarena_live/runs/journal.py)": 3,
        "WebArenaLive.requestheaders (webarena_live/proxy/addon.py)": 2,
    }
    assert shares.by_function["Journal.write (webarena_live/runs/journal.py)"] == 3
    assert "<module> (webarena_live/commands/cli.py)" not in shares.by_function
    shown = table(shares)
    assert "| WebArenaLive.response (webarena_live/proxy/addon.py) | 7 | 7.00% |" in shown
    assert "the addon's: 12 (12.0%)" in shown


def test_frame_names_and_bad_input():
    assert (
        frame_name("f (/x/build/y/webarena_live/proxy/capture.py:12)") == "f (webarena_live/proxy/capture.py)"
    )
    assert frame_name("select (selectors.py:468)") == "select (selectors.py)"
    with pytest.raises(ValueError, match="not py-spy's raw format"):
        parse_raw("<svg>flame graph</svg>")
    with pytest.raises(ValueError, match="line 1 is not py-spy's raw format"):  # gives up early
        parse_raw("<svg>\n" + "<g>\n" * 10_000 + "main 1\n")
    # a frame named by code compiled from a string can hold a line break: its sample goes on
    broken = "main (cli.py:1);<lambda> (<string of\nfast>:1) 4\nmain (cli.py:1) 2\n"
    assert parse_raw(broken) == {
        ("main (cli.py:1)", "<lambda> (<string of\nfast>:1)"): 4,
        ("main (cli.py:1)",): 2,
    }
    assert table(hook_shares(parse_raw(""))).startswith("no samples")


class Pages(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")


@pytest.fixture
def pages() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Pages)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


PER_FLOW = {
    "WebArenaLive.requestheaders (webarena_live/proxy/addon.py)",
    "WebArenaLive.response (webarena_live/proxy/addon.py)",
    "TurnWrites.flush (webarena_live/runs/journal.py)",
}
"""Hooks every flow passes through: a recording of serve under load names at least two of them."""


def test_a_recording_of_serve_under_load_names_its_hooks(tmp_path, pages):
    tasks, config = (
        write_tasks(tmp_path),
        write_config(tmp_path / "s.json", {"__SHOPPING__": {"urls": [pages]}}),
    )
    proxy = start_proxy(tmp_path / "proxy", tasks=tasks, config=config)
    stop = threading.Event()

    def agent() -> None:
        client = requests.Session()
        client.trust_env = False
        client.proxies = {"http": f"http://p:pw@127.0.0.1:{proxy.port}"}
        while not stop.is_set():
            assert client.get(f"{pages}/x", timeout=10).ok

    agents = [threading.Thread(target=agent) for _ in range(4)]
    samples: Counter[Any] = Counter()
    try:
        assert proxy.control.post("/sessions", {"task_id": NAVIGATE_TASK, "session": "p"}).ok
        for thread in agents:
            thread.start()
        # Recorded in spells until the hooks show: on a loaded machine (a parallel suite) the proxy
        # may get so little CPU that one spell holds a handful of its samples.
        deadline = time.monotonic() + 60
        while True:
            recording = Recording(proxy.process.pid, rate=1000).start()
            time.sleep(4)
            samples += recording.stop()
            shares = hook_shares(samples)
            if len(PER_FLOW & set(shares.by_hook)) >= 2 or time.monotonic() > deadline:
                break
    finally:
        stop.set()
        for thread in agents:
            thread.join()
        proxy.stop()
    assert shares.total > 0 and 0 < shares.addon < shares.total
    assert len(PER_FLOW & set(shares.by_hook)) >= 2, shares.by_hook
    assert all(name.endswith(".py)") and "/work/" not in name for name in shares.by_hook)
