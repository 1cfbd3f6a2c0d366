"""The suite-wide rule that tests talk only to loopback, checked on the proxies under test.

`install` puts `tests/support/guarded_site/` on `PYTHONPATH` and names a log file, for this test
process and every process it starts: there `sitecustomize.py` notes each name lookup or connection a
proxy (`webarena-live serve`, `mitmdump`) makes beyond loopback (and the networks a test allows for
namespaces it made itself), and refuses it. `Guard.take` reads what was noted since it last read,
so the test during which a proxy reached out fails (`tests/conftest.py`); a test that makes a proxy
reach out on purpose (the guard's own test) takes the notes itself.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from tests.support.paths import SUPPORT

SITE = SUPPORT / "guarded_site"
LOG_VARIABLE = "WEBARENA_TEST_NETWORK_LOG"
ALLOW_VARIABLE = "WEBARENA_TEST_ALLOWED_NETWORKS"


class Guard:
    """The log of this test process's proxies, read once: each note is taken by one reader."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self._read = 0

    def take(self) -> list[dict[str, Any]]:
        """The notes written since the last `take` (whole lines only)."""
        with self.log.open("rb") as file:
            file.seek(self._read)
            data = file.read()
        whole = data[: data.rfind(b"\n") + 1]
        self._read += len(whole)
        return [json.loads(line) for line in whole.splitlines() if line.strip()]


GUARD: Guard | None = None
"""This test process's guard, once `install` ran (the root conftest's `pytest_configure`)."""


def install(worker: str) -> Guard:
    """Guard every process this one starts from now on (their notes go to a new log file)."""
    global GUARD
    log = Path(tempfile.mkdtemp(prefix="webarena-live-network-guard-")) / f"{worker}.jsonl"
    log.touch()
    os.environ[LOG_VARIABLE] = str(log)
    paths = [str(SITE), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    GUARD = Guard(log)
    return GUARD


def allowing(networks: list[str], env: dict[str, str] | None = None) -> dict[str, str]:
    """An environment for a proxy that may also reach `networks` (a namespace the test made itself)."""
    env = dict(os.environ if env is None else env)
    env[ALLOW_VARIABLE] = ",".join(networks)
    return env
