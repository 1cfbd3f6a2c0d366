"""A site with a page at every path (and 500 under `/broken/`) behind a real `webarena-live serve`, and
one session run through it from start to finish, for the tests of faults made on purpose and of the
site errors a verdict carries."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.support.counter_replicas import DEMO_TASKS, READ
from tests.support.serve_process import NAVIGATION, Served, finish, launch_serve


class _Page(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = f"<!doctype html><title>{self.path}</title><p>{'x' * 2000}</p>".encode()
        self.send_response(500 if self.path.startswith("/broken/") else 200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def serve(workdir: Path, site: str, *extra: str) -> Served:
    workdir.mkdir(parents=True)
    config = workdir / "config.json"
    config.write_text(json.dumps({"environments": {"__SHOPPING__": {"urls": [site]}}}))
    return launch_serve(
        workdir, "--tasks", str(DEMO_TASKS), "--config", str(config), "--output-dir", str(workdir / "out"),
        "--set", f"confdir={workdir / 'conf'}", "--quiet", *extra,
    )  # fmt: skip


def browse(served: Served, session: str, site: str, paths: list[str]) -> list[str]:
    """Navigate to each path in turn through the session's credentials: what the agent saw of each."""
    proxy = f"http://{session}:x@127.0.0.1:{served.proxy_port}"
    client = requests.Session()
    client.trust_env = False
    seen = []
    for path in paths:
        try:
            reply = client.get(f"{site}{path}", proxies={"http": proxy}, headers=NAVIGATION, timeout=10)
            seen.append(str(reply.status_code))
        except requests.ConnectionError:
            seen.append("dropped")
    return seen


def run_session(served: Served, session: str, site: str, paths: list[str], **start: Any) -> dict[str, Any]:
    """Start `session` on the demo's reading task, browse `paths`, finish it: what it saw, its session view,
    its finish's answer and its files."""
    body = {"task_id": READ, "session": session, "run": session, **start}
    assert requests.post(f"{served.control}/sessions", json=body, timeout=30).status_code == 200
    seen = browse(served, session, site, paths)
    view = requests.get(f"{served.control}/sessions/{session}", timeout=10).json()
    trace = requests.get(f"{served.control}/sessions/{session}/trace", timeout=10).json()["events"]
    answer = {"task_type": "RETRIEVE", "status": "SUCCESS", "retrieved_data": ["nothing"]}
    finished = finish(served.control, session, answer)
    assert finished.status_code == 200, finished.text
    after = requests.get(f"{served.control}/sessions/{session}", timeout=10).json()
    folder = Path(after["outputs"]["eval_result.json"]).parent
    return {
        "seen": seen,
        "view": view,
        "after": after,
        "trace": trace,
        "answer": finished.json(),
        "folder": folder,
    }


def read(folder: Path, name: str) -> Any:
    return json.loads((folder / name).read_text())
