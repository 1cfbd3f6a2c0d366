"""Fixtures shared by every test module.

The reference evaluator (the "oracle", webarena-verified==1.2.3) pins its own
pydantic, so it lives in its own virtual environment and is only ever run as a
separate process. `scripts/bootstrap.sh` creates it; if a test run finds none,
the `oracle_python` fixture creates it once (never skips: parity is measured).

Tests talk only to loopback (and to network namespaces a test made itself): every proxy a test
starts notes each name lookup or connection beyond that (`tests/support/network_guard.py`), and the
test during which one was noted fails in its teardown, whatever it asserted itself.
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

from scripts.support.conformance import progress
from scripts.support.conformance.oracle_env import official_dataset as dataset_in_oracle
from tests.support import network_guard

# Read by Ray once, when it is first imported, in whichever module that happens: set here, before
# any test module is collected, so every Ray cluster a test starts on 127.0.0.1 stays there (with 1,
# Ray swaps 127.0.0.1 for the machine's other address). The namespace tests give their `ray start`
# processes 1 themselves.
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"

REPO = Path(__file__).resolve().parent.parent
ORACLE_VERSION = "1.2.3"
HEARTBEAT_SECONDS = 30


def pytest_configure(config: pytest.Config) -> None:
    # Taken while pytest's output capture is suspended, so this is the real stderr: progress lines
    # written to it reach the log while a test runs (see scripts/support/conformance/progress.py).
    progress.use(os.fdopen(os.dup(2), "w", buffering=1, encoding="utf-8"))
    network_guard.install(os.environ.get("PYTEST_XDIST_WORKER", "main"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[pytest.TestReport]:
    """After a test's teardown (its module's proxies stopped, if it was their last test): any lookup or
    connection beyond loopback a proxy made since the previous test fails this one."""
    report: pytest.TestReport = yield
    if call.when != "teardown" or network_guard.GUARD is None:
        return report
    notes = network_guard.GUARD.take()
    if notes:
        told = "\n".join(f"  pid {n['pid']} ({n['argv']}): {n['reached']}" for n in notes[:20])
        report.outcome = "failed"
        report.longrepr = f"a proxy under test reached beyond loopback during {item.nodeid}:\n{told}"
    return report


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
