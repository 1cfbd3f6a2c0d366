"""A Podman engine's Docker-compatible service (`podman system service`) on a unix socket of its own,
over a podman storage of its own: started, waited for, emptied and stopped — for the tests'
engines (tests/support/engines.py, which hands out their storages) and the benchmark's
(scripts/bench_sites_engine.py). The images come from scripts/build_site_images.sh (nothing can be
pulled here).

Containers need explicit ulimits here (ULIMITS): podman asks runc for a container's limits above the
hard limits it inherited itself (1048576 open files unless told), and runc may not raise a limit past
those without CAP_SYS_RESOURCE, which these machines' sandboxes drop, so `run` fails ("error setting
rlimits ... operation not permitted") unless the limits asked for are within the service's own.
"""

from __future__ import annotations

import contextlib
import ctypes
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import docker
import docker.errors

REPO = Path(__file__).resolve().parents[2]
ULIMITS: dict[str, tuple[int, int]] = {"nofile": (16384, 16384), "nproc": (16384, 16384)}
"""Each limit as (soft, hard): within what podman's service runs with here, generous for a web site."""
API_VERSION = "1.41"
"""The Docker API version asked for: podman 4.3's compatible service answers 1.41. Named, because a
client left to find it (`version=None`, "auto") asks the service's /version, which takes podman seconds
(it looks up its components' package versions) every time a client is made."""
BUILD = REPO / "scripts" / "build_site_images.sh"
SHOPPING = "docker.io/am1n3e/webarena-verified-shopping:latest"
"""The test image of the shop (tests/containers/image/): orders kept in the container, `SITE_START_DELAY`
seconds of sleep before the site listens."""
PR_SET_PDEATHSIG = 1  # prctl(2)


def ulimits() -> list[docker.types.Ulimit]:
    """ULIMITS as the docker package takes them (`containers.run(..., ulimits=ulimits())`)."""
    return [docker.types.Ulimit(name=name, soft=soft, hard=hard) for name, (soft, hard) in ULIMITS.items()]


@dataclass
class Engine:
    """A running podman service: `url` is what a Docker client takes (`unix:///…/api.sock`)."""

    url: str
    root: Path
    runroot: Path
    log: Path
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def client(self, timeout: int = 120) -> docker.DockerClient:
        return docker.DockerClient(base_url=self.url, version=API_VERSION, timeout=timeout)

    def podman(
        self, *args: str, check: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """The podman CLI on this engine's storage (`engine.podman("ps", "--format", "{{.Names}}")`)."""
        return subprocess.run(
            ["podman", "--root", str(self.root), "--runroot", str(self.runroot), "--runtime", "runc", *args],
            capture_output=True, text=True, check=check, timeout=timeout,
        )  # fmt: skip

    def container_names(self, all: bool = True) -> list[str]:  # podman's own word
        done = self.podman("ps", *(["--all"] if all else []), "--format", "{{.Names}}")
        return sorted(done.stdout.split())

    def remove_everything(self) -> None:
        """Every container and volume of this engine's storage: all of them are the tests'."""
        self.podman("rm", "--all", "--force", "--time", "1")
        self.podman("volume", "rm", "--all", "--force")

    def log_tail(self, lines: int = 40) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        return ""


def ensure_images(root: Path | None = None, runroot: Path | None = None) -> None:
    """The test images in podman's default storage and, when given, in that storage too (built or
    copied only when missing or out of date: the script is quick otherwise)."""
    args = [] if root is None or runroot is None else ["--root", str(root), "--runroot", str(runroot)]
    done = subprocess.run(["bash", str(BUILD), *args], capture_output=True, text=True, timeout=1200)
    if done.returncode != 0:
        raise RuntimeError(
            f"scripts/build_site_images.sh {' '.join(args)} failed ({done.returncode}):\n"
            f"{done.stdout}{done.stderr}"
        )


def _end_with_parent() -> None:
    """In the service's process before it runs podman: SIGTERM when the test process dies, even killed
    (the service would otherwise outlive it, in a session of its own so Ctrl-C reaches the teardown)."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def start_engine(root: Path, runroot: Path, socket_dir: Path, timeout: float = 60) -> Engine:
    """Start `podman system service` on `socket_dir`/api.sock over that storage, and wait until it answers."""
    socket = socket_dir / "api.sock"
    engine = Engine(f"unix://{socket}", root, runroot, socket_dir / "service.log")
    with engine.log.open("wb") as log:
        engine.process = subprocess.Popen(
            ["podman", "--root", str(root), "--runroot", str(runroot), "--runtime", "runc",
             "system", "service", "--time=0", engine.url],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            preexec_fn=_end_with_parent,
        )  # fmt: skip
    deadline = time.monotonic() + timeout
    while True:
        if engine.process.poll() is not None:
            code = engine.process.returncode
            raise RuntimeError(f"podman system service exited ({code}):\n{engine.log_tail()}")
        if socket.exists():
            with contextlib.suppress(docker.errors.DockerException, OSError):
                if engine.client(timeout=5).ping():
                    break
        if time.monotonic() > deadline:
            stop_engine(engine)
            raise RuntimeError(f"podman system service did not answer on {engine.url} in {timeout:.0f}s")
        time.sleep(0.1)
    _check_limits(engine)
    return engine


def _check_limits(engine: Engine) -> None:
    """Fail at once, saying why, when the service's own limits are below ULIMITS (every `run` would fail)."""
    assert engine.process is not None
    names = {"Max open files": "nofile", "Max processes": "nproc"}
    limits = Path(f"/proc/{engine.process.pid}/limits").read_text().splitlines()
    for line in limits:
        for label, name in names.items():
            if line.startswith(label):
                hard = line[len(label) :].split()[1]
                if hard != "unlimited" and int(hard) < ULIMITS[name][1]:
                    stop_engine(engine)
                    raise RuntimeError(
                        f"podman's service runs with a hard {name} limit of {hard}, below the tests' "
                        f"{ULIMITS[name][1]} (scripts/support/engines.py ULIMITS): containers could not start"
                    )


def stop_engine(engine: Engine) -> None:
    """Remove every container and volume of the engine's storage, then end its service."""
    try:
        engine.remove_everything()
    finally:
        process = engine.process
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
