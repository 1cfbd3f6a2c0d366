"""Progress lines for long steps, shown in the log while the step runs.

pytest captures file descriptors 1 and 2 while a test runs, so a plain print
shows up only after the test (or never, when it passes). tests/conftest.py
hands `use` a duplicate of the real stderr, taken before any test runs;
outside pytest (the refresh script) the lines go to stderr.
"""

from __future__ import annotations

import sys
from typing import TextIO

_stream: TextIO | None = None


def use(stream: TextIO) -> None:
    global _stream
    _stream = stream


def say(message: str, source: str = "conformance") -> None:
    stream = _stream or sys.stderr
    stream.write(f"\n[{source}] {message}\n")
    stream.flush()
