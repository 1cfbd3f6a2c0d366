"""The test image's first process: it supervises the shop (`shop.py`, a child process) and serves an
environment-control API shaped like the official images' `env-ctrl` (the reference at v1.2.3:
packages/environment_control/environment_control/server/app.py for the routes and answers,
.../ops/types.py for `Result.to_dict`'s shape).

    GET  /status    200 {"success": <the shop listens>, "message": "", "details": {"value": {"services":
                    {"shop": "RUNNING" | "STARTING" | "STOPPED" | "EXITED"}}, "exec_logs": [...]}}
    POST /init      starts the shop if it is not running and waits until it listens
    POST /start     starts it (`?wait=1`: and waits until it listens)
    POST /stop      stops it
    POST /restart   stops and starts it (`?wait=1`: and waits): a new process on the SAME data file,
                    which is what the official `/restart` does to a site's databases (they are kept)
    GET  /          a small dashboard
    anything else   404 {"success": false, "error": "Not found"}
    POSTs answer 200 on success, 500 on failure, in the same shape as /status.

Environment: WA_ENV_CTRL_PORT (8877), WA_ENV_CTRL_CMD_TIMEOUT_SEC (180: how long a wait may last), and
what shop.py reads. SIGTERM (`podman stop`) stops the shop and ends this process with status 0.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

SHOP = Path(__file__).with_name("shop.py")
SITE_PORT = int(os.environ.get("SITE_PORT") or 80)
TIMEOUT = float(os.environ.get("WA_ENV_CTRL_CMD_TIMEOUT_SEC") or 180)
os.environ["SUPERVISOR_STARTED"] = repr(time.time())  # the shop's /whoami tells it: a new container or not


def listening() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", SITE_PORT), timeout=0.5):
            return True
    except OSError:
        return False


class Supervisor:
    """The shop's process: one at a time, every operation under one lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.process: subprocess.Popen[bytes] | None = None
        self.stopped = False  # stopped on purpose (/stop), as against exited by itself

    def state(self) -> str:
        if self.process is None or self.stopped:
            return "STOPPED"
        if self.process.poll() is not None:
            return "EXITED"
        return "RUNNING" if listening() else "STARTING"

    def status(self) -> dict[str, Any]:
        state = self.state()
        return result(state == "RUNNING", {"services": {"shop": state}})

    def start(self, wait: bool) -> dict[str, Any]:
        with self.lock:
            log = self._start()
            if not wait:
                return result(True, None, [log])
            deadline = time.monotonic() + TIMEOUT
            while self.state() == "STARTING" and time.monotonic() < deadline:
                time.sleep(0.1)
            state = self.state()
            return result(state == "RUNNING", {"services": {"shop": state}}, [log])

    def stop(self) -> dict[str, Any]:
        with self.lock:
            return result(True, None, [self._stop()])

    def restart(self, wait: bool) -> dict[str, Any]:
        with self.lock:
            logs = [self._stop()]
        answer = self.start(wait)
        answer["details"]["exec_logs"][:0] = logs
        return answer

    def _start(self) -> dict[str, Any]:
        if self.process is not None and self.process.poll() is None and not self.stopped:
            return exec_log("start shop", 0, f"already running (pid {self.process.pid})")
        self.process = subprocess.Popen([sys.executable, str(SHOP)])
        self.stopped = False
        return exec_log("start shop", 0, f"started (pid {self.process.pid})")

    def _stop(self) -> dict[str, Any]:
        process, self.stopped = self.process, True
        if process is None or process.poll() is not None:
            return exec_log("stop shop", 0, "not running")
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        return exec_log("stop shop", 0, f"stopped (pid {process.pid})")


def exec_log(command: str, returncode: int, stdout: str) -> dict[str, Any]:
    return {"command": command, "returncode": returncode, "stdout": stdout, "stderr": ""}


def result(success: bool, value: Any, logs: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"success": success, "message": "", "details": {"value": value, "exec_logs": logs or []}}


SUPERVISOR = Supervisor()


class Handler(BaseHTTPRequestHandler):
    server_version = "webarena-live-test-env-ctrl/1"

    def log_message(self, format: str, *args: Any) -> None:
        sys.stderr.write(f"env-ctrl: {self.address_string()} {format % args}\n")

    def _json(self, value: dict[str, Any], status: int = 200) -> None:
        body = json.dumps(value, indent=2).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        if path == "/status":
            self._json(SUPERVISOR.status())
        elif path == "/":
            body = f"<!doctype html><title>env-ctrl</title><p>shop: {SUPERVISOR.state()}</p>".encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        else:
            self._json({"success": False, "error": "Not found"}, 404)

    def do_POST(self) -> None:
        parts = urlsplit(self.path)
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        wait = parse_qs(parts.query).get("wait") == ["1"]
        if parts.path == "/init":
            answer = SUPERVISOR.start(wait=True)
        elif parts.path == "/start":
            answer = SUPERVISOR.start(wait)
        elif parts.path == "/stop":
            answer = SUPERVISOR.stop()
        elif parts.path == "/restart":
            answer = SUPERVISOR.restart(wait)
        else:
            self._json({"success": False, "error": "Not found"}, 404)
            return
        self._json(answer, 200 if answer["success"] else 500)


def main() -> None:
    server = ThreadingHTTPServer(("0.0.0.0", int(os.environ.get("WA_ENV_CTRL_PORT") or 8877)), Handler)
    server.daemon_threads = True

    def terminate(*_: object) -> None:  # as PID 1 nothing ends this process but its own handler
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, terminate)
    signal.signal(signal.SIGINT, terminate)
    SUPERVISOR.start(wait=False)
    print(f"env-ctrl: serving on port {server.server_address[1]}", file=sys.stderr, flush=True)
    server.serve_forever(poll_interval=0.1)  # a quick stop: shutdown() waits for the next poll
    server.server_close()
    SUPERVISOR.stop()


if __name__ == "__main__":
    main()
