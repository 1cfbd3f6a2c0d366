"""A real `webarena-live serve` for tests: a subprocess on free ports in front of the demo shop."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.site.harness import check_preview
from webarena_live.addon.demo import site as demo_site
from webarena_live.addon.demo.stack import free_ports

CLI = Path(sys.executable).parent / "webarena-live"


@pytest.fixture(scope="module")
def shop() -> Iterator[str]:
    server = demo_site.serve("127.0.0.1", 0)
    yield server.url
    server.shutdown()


@dataclass
class Served:
    """A running `webarena-live serve`."""

    process: subprocess.Popen[str]
    control: str
    """The control API's base URL."""
    proxy_port: int

    def stop(self) -> str:
        """Ctrl-C, as a person stops it; what it printed."""
        self.process.send_signal(signal.SIGINT)
        return self.process.communicate(timeout=30)[0]


def launch_serve(cwd: Path, *args: str, env: dict[str, str] | None = None) -> Served:
    """`webarena-live serve ARGS` in `cwd` on free ports, once /health answers (`args` name no ports)."""
    port, session_port, control_port = free_ports(3)
    process = subprocess.Popen(
        [str(CLI), "serve", "--port", str(port), "--session-port", str(session_port),
         "--control-port", str(control_port), *args],
        cwd=cwd, env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    control = f"http://127.0.0.1:{control_port}"
    deadline = time.monotonic() + 60
    while True:
        assert process.poll() is None, process.communicate()[0]
        try:
            if requests.get(f"{control}/health", timeout=1).ok:
                return Served(process, control, port)
        except requests.ConnectionError:
            pass
        assert time.monotonic() < deadline, "serve did not come up"
        time.sleep(0.2)


def start_serve(
    tmp_path: Path, shop: str, state: Path, *extra: str
) -> tuple[subprocess.Popen[str], str, str]:
    """The demo tasks with the demo shop mapped, journals under `state`: (process, control, proxy URL)."""
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"environments": {"__SHOPPING__": {"urls": [shop]}}}))
    served = launch_serve(
        tmp_path, "--config", str(config), "--set", f"confdir={tmp_path / 'conf'}", *extra,
        env={"XDG_STATE_HOME": str(state)},
    )  # fmt: skip
    return served.process, served.control, f"http://127.0.0.1:{served.proxy_port}"


def finish(
    control: str, session: str, answer: Any, *, timeout: float = 30, **kwargs: Any
) -> requests.Response:
    """`POST {control}/sessions/{session}/finish`, preceded by a preview with the same body that must say
    what the finish then did (`harness.check_preview`), as every finish through the live harness is."""
    base = f"{control}/sessions/{session}"
    preview = requests.post(f"{base}/preview", json=answer, timeout=timeout, **kwargs)
    reply = requests.post(f"{base}/finish", json=answer, timeout=timeout, **kwargs)
    check_preview(preview, reply)
    return reply
