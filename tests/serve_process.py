"""A real `webarena-live serve` for tests: a subprocess on free ports in front of the demo shop."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.site.harness import check_preview
from webarena_live.addon.demo import site as demo_site
from webarena_live.launch import ServeProcess

NAVIGATION = {
    "Accept": "text/html,application/xhtml+xml",
    "Sec-Fetch-Dest": "document",
    "Sec-Fetch-Mode": "navigate",
    "Sec-Fetch-User": "?1",
    "Sec-Fetch-Site": "none",
}
"""Request headers of a browser's navigation (what the evaluator counts as one), for HTTP clients."""
NAVIGATED = {"task_type": "NAVIGATE", "status": "SUCCESS", "retrieved_data": None}
"""A navigate task's final answer."""


@pytest.fixture(scope="module")
def shop() -> Iterator[str]:
    server = demo_site.serve("127.0.0.1", 0)
    yield server.url
    server.shutdown()


class Served(ServeProcess):
    """A running `webarena-live serve` for a test."""

    @property
    def control(self) -> str:
        """The control API's base URL."""
        return self.control_url

    @property
    def proxy_port(self) -> int:
        return self.ports.proxy

    def stop(self, *, timeout: float = 30) -> str:  # type: ignore[override]
        """Ctrl-C, as a person stops it; what it printed."""
        super().stop(timeout=timeout)
        return self.log_tail(1_000_000)


def launch_serve(cwd: Path, *args: str, env: dict[str, str] | None = None) -> Served:
    """`webarena-live serve ARGS` in `cwd` on free ports, once /health answers (`args` name no ports)."""
    served = Served(*args, cwd=cwd, env=env)
    served.start()
    return served


def start_serve(tmp_path: Path, shop: str, state: Path, *extra: str) -> tuple[Served, str, str]:
    """The demo tasks with the demo shop mapped, journals under `state`: (served, control, proxy URL);
    `served.stop()` stops it and answers what it printed."""
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"environments": {"__SHOPPING__": {"urls": [shop]}}}))
    served = launch_serve(
        tmp_path, "--config", str(config), "--set", f"confdir={tmp_path / 'conf'}", *extra,
        env={"XDG_STATE_HOME": str(state)},
    )  # fmt: skip
    return served, served.control, served.proxy_url


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
