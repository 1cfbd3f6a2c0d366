"""Real container engines for the tests: Podman's Docker-compatible service (`podman system service`)
on a unix socket of its own, over a podman storage of its own, with the test images in it
(scripts/build_site_images.sh builds them; nothing can be pulled here). The service itself, started
and stopped, is scripts/support/engines.py's (the benchmarks start theirs the same way).

Each engine has its own storage (`--root`/`--runroot`), so containers made through one are not seen by
another, two engines are two machines' engines as far as a client can tell, and everything in an
engine's storage is the tests': removing all its containers (at the start of a session, for what a killed
one left, and at its end) never touches a container of anyone else. The storages live in numbered slots
under WEBARENA_LIVE_TEST_ENGINES (default /var/tmp/webarena-live-test-engines), each held by one test
session at a time (a lock file), so pytest-xdist's workers and two test runs side by side each have
their own; a slot keeps its images from one session to the next.

Containers need explicit ulimits here (`ulimits`): scripts/support/engines.py says why.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from scripts.support.engines import SHOPPING, Engine, ensure_images, start_engine, stop_engine, ulimits

__all__ = [
    "SHOPPING",
    "Engine",
    "engine_in",
    "slot",
    "ulimits",
]  # the service itself: scripts/support/engines.py

TEST_LABEL = "webarena-live.test"
"""A label tests may put on the containers they create themselves (`labels={TEST_LABEL: "1"}`)."""
REDDIT = "docker.io/am1n3e/webarena-verified-reddit:latest"
SLOW_SITE = "localhost/webarena-live-test/slow-site:latest"
"""The shop with SITE_START_DELAY=20 in its environment: ready tens of seconds after it starts."""
IMAGES = (SHOPPING, REDDIT, SLOW_SITE)
SITE_PORT, ENV_CTRL_PORT = 80, 8877
HOME = Path(os.environ.get("WEBARENA_LIVE_TEST_ENGINES") or "/var/tmp/webarena-live-test-engines")
SLOTS = 16


def _run_dir() -> Path:
    """Where runroots go: a tmpfs emptied at boot (podman's own choice, /run) when it can be written."""
    run = Path("/run")
    return run / "webarena-live-test-engines" if os.access(run, os.W_OK) else HOME / "run"


def storage(place: Path, number: int) -> tuple[Path, Path]:
    """The root and runroot of engine `number` of a slot."""
    return place / f"engine-{number}", _run_dir() / place.name / f"engine-{number}"


@contextlib.contextmanager
def slot(only: int | None = None) -> Iterator[Path]:
    """The first slot no other session holds (or slot `only`), held (a lock file) until the block ends."""
    HOME.mkdir(parents=True, exist_ok=True)
    for number in range(SLOTS) if only is None else [only]:
        place = HOME / f"slot-{number}"
        place.mkdir(exist_ok=True)
        with (place / "lock").open("w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue
            yield place
            return
    raise RuntimeError(f"no engine slot under {HOME} is free (other test sessions hold them)")


@contextlib.contextmanager
def engine_in(place: Path, number: int) -> Iterator[Engine]:
    """Engine `number` of a slot this session holds: its storage with the test images, its service
    started, every container and volume in it removed before (what a killed session left) and after."""
    root, runroot = storage(place, number)
    ensure_images(root, runroot)
    sockets = Path(tempfile.mkdtemp(prefix="wl-engine-"))  # short: a unix socket's path has 108 bytes
    try:
        engine = start_engine(root, runroot, sockets)
        try:
            engine.remove_everything()
            yield engine
        finally:
            stop_engine(engine)
    finally:
        shutil.rmtree(sockets, ignore_errors=True)
