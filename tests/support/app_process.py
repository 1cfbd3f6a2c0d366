"""A web application of the test apps (kiwix-serve, Redmine's puma) run as a process group of its own:
started, waited for until a page answers 200, and stopped (SIGTERM, then SIGKILL) whatever happens."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import requests


@contextmanager
def serving(
    command: Sequence[str],
    probe: str,
    log_path: Path,
    *,
    timeout: float,
    poll: float,
    grace: float = 10,
    probe_timeout: float = 5,
    **popen: Any,
) -> Iterator[None]:
    """`command` running, its output in `log_path`, once `probe` (a URL) answers 200."""
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            list(command), stdout=log, stderr=subprocess.STDOUT, start_new_session=True, **popen
        )
        try:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    if requests.get(probe, timeout=probe_timeout).status_code == 200:
                        break
                except requests.ConnectionError:
                    pass
                if process.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"{command[0]} did not answer {probe}; its log {log_path}:\n"
                                         f"{log_path.read_text(errors='replace')[-3000:]}")  # fmt: skip
                time.sleep(poll)
            yield
        finally:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
