"""A real `webarena-live serve` for tests: a subprocess on free ports in front of the demo shop."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from webarena_live.addon import demo_site
from webarena_live.addon.demo_stack import free_ports

CLI = Path(sys.executable).parent / "webarena-live"


@pytest.fixture(scope="module")
def shop() -> Iterator[str]:
    server = demo_site.serve("127.0.0.1", 0)
    yield server.url
    server.shutdown()


def start_serve(
    tmp_path: Path, shop: str, state: Path, *extra: str
) -> tuple[subprocess.Popen[str], str, str]:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"environments": {"__SHOPPING__": {"urls": [shop]}}}))
    port, session_port, control_port = free_ports(3)
    process = subprocess.Popen(
        [str(CLI), "serve", "--config", str(config), "--port", str(port), "--session-port", str(session_port),
         "--control-port", str(control_port), "--set", f"confdir={tmp_path / 'conf'}", *extra],
        env={**os.environ, "XDG_STATE_HOME": str(state), "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    control = f"http://127.0.0.1:{control_port}"
    deadline = time.monotonic() + 30
    while True:
        assert process.poll() is None, process.communicate()[0]
        try:
            if requests.get(f"{control}/health", timeout=1).ok:
                return process, control, f"http://127.0.0.1:{port}"
        except requests.ConnectionError:
            pass
        assert time.monotonic() < deadline, "serve did not come up"
        time.sleep(0.2)
