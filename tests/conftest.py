"""Fixtures shared by every test module.

The reference evaluator (the "oracle", webarena-verified==1.2.3) pins its own
pydantic, so it lives in its own virtual environment and is only ever run as a
separate process. `scripts/bootstrap.sh` creates it; if a test run finds none,
the `oracle_python` fixture creates it once (never skips: parity is measured).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conformance import progress
from tests.conformance.oracle_env import official_dataset as dataset_in_oracle

REPO = Path(__file__).resolve().parent.parent
ORACLE_VERSION = "1.2.3"
HEARTBEAT_SECONDS = 30


def pytest_configure(config: pytest.Config) -> None:
    # Taken while pytest's output capture is suspended, so this is the real stderr: progress lines
    # written to it reach the log while a test runs (see conformance/progress.py).
    progress.use(os.fdopen(os.dup(2), "w", buffering=1, encoding="utf-8"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    """A line every 30 s while one test (setup and teardown included) runs, so a CI log never goes quiet."""
    done = threading.Event()

    def beat() -> None:
        started = time.monotonic()
        while not done.wait(HEARTBEAT_SECONDS):
            progress.say(f"{item.nodeid} still running after {time.monotonic() - started:.0f}s", "pytest")

    threading.Thread(target=beat, name="heartbeat", daemon=True).start()
    try:
        return (yield)
    finally:
        done.set()


def _ensure_oracle() -> Path:
    configured = os.environ.get("WEBARENA_ORACLE")
    if configured:
        return Path(configured)
    venv = REPO / ".oracle-venv"
    python = venv / "bin" / "python"
    if not (venv / "bin" / "webarena-verified").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", f"webarena-verified=={ORACLE_VERSION}"],
            check=True,
        )
    return python


@pytest.fixture(scope="session")
def oracle_python() -> Path:
    """Python interpreter of the oracle's virtual environment."""
    return _ensure_oracle()


@pytest.fixture(scope="session")
def official_dataset(oracle_python: Path) -> Path:
    """The official 812-task dataset file shipped inside the oracle package."""
    return dataset_in_oracle(oracle_python)
