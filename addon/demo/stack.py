"""The processes behind `webarena-live demo`: the Demo Shop, the proxy, and the control API client.

The shop runs in a thread of this process; the proxy is `webarena-live serve`
in a child process of the same interpreter, in its own session so that a
terminal's Ctrl-C reaches only the demo, which then stops it in order.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from webarena_live.addon.demo import site as demo_site
from webarena_live.evaluator import WebArenaLiveError

CONFIG_FILE = "config.json"
PROXY_LOG = "proxy.log"
PROXY_START_TIMEOUT_S = 30.0


class DemoError(WebArenaLiveError):
    """Something the demo needs is missing or broke; the message is one line for the user."""


@dataclass(frozen=True)
class Ports:
    """The proxy's three listening ports."""

    proxy: int
    session: int
    control: int


def free_ports(count: int) -> list[int]:
    """Distinct ports that were free a moment ago on 127.0.0.1."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def write_site_config(output_dir: Path, site_url: str, tasks_file: Path) -> Path:
    """The site map in the reference's config format, for `serve --config` and `evaluate --config`.

    The reference reads the same file, but its `eval-tasks` only accepts a
    `test_data_file` of exactly 812 tasks (tests/test_demo.py shows the padding).
    """
    config = {
        "test_data_file": str(tasks_file),
        "environments": {"__SHOPPING__": {"urls": [site_url], "active_url_idx": 0}},
    }
    path = output_dir / CONFIG_FILE
    path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return path


class ControlClient:
    """The proxy's control API on its own port (JSON in, JSON out)."""

    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"
        # Control calls go straight to the port, never through a proxy from the environment.
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def call(self, method: str, path: str, body: Any = None, *, timeout: float = 30.0) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        try:
            with self._opener.open(request, timeout=timeout) as reply:
                return json.loads(reply.read())
        except urllib.error.HTTPError as error:
            detail = error.read().decode("utf-8", "replace")
            raise DemoError(f"control API {method} {path} answered {error.code}: {detail}") from None
        except (OSError, json.JSONDecodeError) as error:
            raise DemoError(f"control API {method} {path} failed: {error}") from None

    def wait_healthy(self, proxy: subprocess.Popen[bytes], log: Path) -> dict[str, Any]:
        deadline = time.monotonic() + PROXY_START_TIMEOUT_S
        while time.monotonic() < deadline:
            if proxy.poll() is not None:
                tail = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-5:]
                code = proxy.returncode
                raise DemoError(f"the proxy exited with code {code}: {' | '.join(tail)} (see {log})")
            try:
                return dict(self.call("GET", "/health", timeout=2.0))
            except DemoError:
                time.sleep(0.1)
        raise DemoError(f"the proxy did not answer on {self.base}/health within {PROXY_START_TIMEOUT_S:.0f}s")


@contextmanager
def running_site() -> Iterator[Any]:
    server = demo_site.serve("127.0.0.1", 0)
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def running_proxy(ports: Ports, output_dir: Path, config: Path, tasks_file: Path) -> Iterator[ControlClient]:
    """`webarena-live serve` as a child process; stopped (and killed if need be) on exit."""
    command = [
        sys.executable,
        "-m",
        "webarena_live.addon.commands.cli",
        "serve",
        "--tasks",
        str(tasks_file),
        "--config",
        str(config),
        "--output-dir",
        str(output_dir),
        "--listen-host",
        "127.0.0.1",
        "--port",
        str(ports.proxy),
        "--session-port",
        str(ports.session),
        "--control-port",
        str(ports.control),
    ]
    log_path = output_dir / PROXY_LOG
    with log_path.open("wb") as log:
        # Its own process group: a Ctrl-C reaches the demo, which then stops the proxy in order.
        proxy = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:
        client = ControlClient(ports.control)
        client.wait_healthy(proxy, log_path)
        yield client
    finally:
        if proxy.poll() is None:
            proxy.terminate()
            try:
                proxy.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proxy.kill()
                proxy.wait()
