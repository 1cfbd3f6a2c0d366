"""The processes behind `webarena-live demo`: the Demo Shop, the proxy, and the control API client.

The shop runs in a thread of this process; the proxy is `webarena-live serve`
in a child process of the same interpreter, in its own session so that a
terminal's Ctrl-C reaches only the demo, which then stops it in order.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from webarena_live.client import Client
from webarena_live.demo import site as demo_site
from webarena_live.evaluator import WebArenaLiveError
from webarena_live.launch import LaunchError, Ports, ServeProcess

CONFIG_FILE = "config.json"
PROXY_LOG = "proxy.log"
PROXY_START_TIMEOUT_S = 30.0


class DemoError(WebArenaLiveError):
    """Something the demo needs is missing or broke; the message is one line for the user."""


def write_site_config(output_dir: Path, site_url: str, tasks_file: Path) -> Path:
    """The site map in the reference's config format, for `serve --config` and `evaluate --config`.

    The reference reads the same file, but its `eval-tasks` only accepts a
    `test_data_file` of exactly 812 tasks (tests/demo/test_demo.py shows the padding).
    """
    config = {
        "test_data_file": str(tasks_file),
        "environments": {"__SHOPPING__": {"urls": [site_url], "active_url_idx": 0}},
    }
    path = output_dir / CONFIG_FILE
    path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return path


@contextmanager
def running_site() -> Iterator[Any]:
    server = demo_site.serve("127.0.0.1", 0)
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def running_proxy(ports: Ports, output_dir: Path, config: Path, tasks_file: Path) -> Iterator[Client]:
    """`webarena-live serve` as a child process (`ServeProcess`), in its own process session so a
    terminal's Ctrl-C reaches the demo, which then stops the proxy in order."""
    served = ServeProcess(
        "--tasks", str(tasks_file), "--config", str(config), "--output-dir", str(output_dir),
        "--listen-host", "127.0.0.1",
        ports=ports, log=output_dir / PROXY_LOG, own_session=True,
    )  # fmt: skip
    try:
        served.start(timeout=PROXY_START_TIMEOUT_S)
    except LaunchError as error:
        raise DemoError(f"{error} (see {served.log})") from None
    try:
        yield served.client
    finally:
        served.stop(timeout=10)
