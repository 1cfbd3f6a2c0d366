"""The container engine and the task of `bench_sites.py`: Podman's Docker-compatible service on a socket
and a storage of the benchmark's own, with the site images in it, and the mutating task its sessions run.

The storage (`--root`/`--runroot`) is the benchmark's alone, so every container and volume in it is the
benchmark's: all of them are removed before the run (what a killed run left) and after it, and nothing of
anyone else's is touched. It is kept under /var/tmp between runs with its images (scripts/
build_site_images.sh copies them in when missing or out of date), and held by one run at a time (a lock).

Podman asks runc for a container's limits, which runc may not raise past the service's own hard limits
here (the sandboxes drop CAP_SYS_RESOURCE), so the site map's entries keep the product's default
`ulimits`, which stay within them.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import docker.errors

REPO = Path(__file__).resolve().parent.parent
BUILD = REPO / "scripts" / "build_site_images.sh"
HOME = Path(os.environ.get("WEBARENA_LIVE_BENCH_ENGINE") or "/var/tmp/webarena-live-bench-sites")
SHOPPING = "docker.io/am1n3e/webarena-verified-shopping:latest"
"""The test image of the shop (tests/containers/image/): orders kept in the container, `SITE_START_DELAY`
seconds of sleep before the site listens."""
API_VERSION = "1.41"
"""What podman 4.3's compatible service answers; named, so a client does not ask /version (slow)."""
PR_SET_PDEATHSIG = 1  # prctl(2)

WRITE = 5002
WRITE_TASK = {
    "sites": ["shopping"], "task_id": WRITE, "intent_template_id": 9502, "start_urls": ["__SHOPPING__"],
    "intent": "Place an order named container-order.", "intent_template": "Place an order named {{name}}.",
    "instantiation_dict": {"name": "container-order"},
    "eval": [
        {"evaluator": "AgentResponseEvaluator", "results_schema": {"type": "null"},
         "expected": {"task_type": "mutate", "status": "SUCCESS", "retrieved_data": None}},
        {"evaluator": "NetworkEventEvaluator",
         "expected": {"url": "__SHOPPING__/order", "http_method": "POST", "response_status": 200,
                      "post_data": {"name": "container-order"}}},
    ],
    "revision": 1,
}  # fmt: skip
"""A mutating task on the shop: place an order (`POST /order`), judged by that request and the answer."""


def write_tasks(path: Path) -> Path:
    path.write_text(json.dumps([WRITE_TASK]))
    return path


def _end_with_parent() -> None:
    """SIGTERM to the service when the benchmark dies, even killed (it would outlive it otherwise)."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class Podman:
    """The benchmark's podman storage and its service: `url` is what a Docker client (and a site map
    entry's `engines`) takes."""

    def __init__(self) -> None:
        run = Path("/run")
        self.root = HOME / "engine"
        self.runroot = (run if os.access(run, os.W_OK) else HOME) / "webarena-live-bench-sites" / "engine"
        self.sockets = Path(tempfile.mkdtemp(prefix="wl-bench-"))  # short: a socket's path has 108 bytes
        self.url = f"unix://{self.sockets / 'api.sock'}"
        self.process: subprocess.Popen[bytes] | None = None

    def podman(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["podman", "--root", str(self.root), "--runroot", str(self.runroot), "--runtime", "runc", *args],
            capture_output=True, text=True, check=True, timeout=300,
        )  # fmt: skip

    def remove_everything(self) -> None:
        self.podman("rm", "--all", "--force", "--time", "1")
        self.podman("volume", "rm", "--all", "--force")

    def start(self, timeout: float = 60) -> None:
        done = subprocess.run(["bash", str(BUILD), "--root", str(self.root), "--runroot", str(self.runroot)],
                              capture_output=True, text=True, timeout=1200, check=False)  # fmt: skip
        if done.returncode:
            raise SystemExit(
                f"scripts/build_site_images.sh failed ({done.returncode}):\n{done.stdout}{done.stderr}"
            )
        self.remove_everything()
        log = (self.sockets / "service.log").open("wb")
        self.process = subprocess.Popen(
            ["podman", "--root", str(self.root), "--runroot", str(self.runroot), "--runtime", "runc",
             "system", "service", "--time=0", self.url],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            preexec_fn=_end_with_parent,
        )  # fmt: skip
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise SystemExit(
                    f"podman system service exited ({self.process.returncode}): {self.log_tail()}"
                )
            with contextlib.suppress(docker.errors.DockerException, OSError):
                client = docker.DockerClient(base_url=self.url, version=API_VERSION, timeout=5)
                if client.ping():
                    client.close()
                    return
            if time.monotonic() > deadline:
                raise SystemExit(f"podman system service did not answer on {self.url} in {timeout:.0f} s")
            time.sleep(0.2)

    def log_tail(self) -> str:
        with contextlib.suppress(OSError):
            return "\n".join((self.sockets / "service.log").read_text(errors="replace").splitlines()[-20:])
        return ""

    def stop(self) -> None:
        """Every container and volume of the storage removed, then the service ended."""
        try:
            self.remove_everything()
        finally:
            if self.process is not None and self.process.poll() is None:
                self.process.terminate()
                try:
                    self.process.wait(15)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait()
            shutil.rmtree(self.sockets, ignore_errors=True)


@contextlib.contextmanager
def podman_service() -> Iterator[Podman]:
    """The benchmark's podman service, its storage held (a lock) until the block ends, emptied after."""
    HOME.mkdir(parents=True, exist_ok=True)
    with (HOME / "lock").open("w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SystemExit(f"another bench_sites.py run holds {HOME} (its lock file)") from None
        engine = Podman()
        try:
            engine.start()
            yield engine
        finally:
            engine.stop()
