"""A mitmproxy script for tests: reports the interpreter's garbage-collector settings as the proxy runs.

Loaded next to the addon (`-s tests/support/gc_probe.py`, or `--set scripts=...`
under `webarena-live serve`), it writes to `$GC_PROBE_REPORT` what it saw after
each response and inside every finish (it wraps `Attempt.finish`).
"""

from __future__ import annotations

import gc
import json
import os
from pathlib import Path
from typing import Any

from mitmproxy import http

from webarena_live.runs.attempt import Attempt

REPORT = Path(os.environ["GC_PROBE_REPORT"])


def gc_settings() -> dict[str, Any]:
    return {"enabled": gc.isenabled(), "frozen": gc.get_freeze_count(), "threshold": list(gc.get_threshold())}


class GcProbe:
    def __init__(self) -> None:
        self.seen: dict[str, Any] = {}
        finish = Attempt.finish

        def probed_finish(*args: Any, **kwargs: Any) -> Any:
            self.note("finish")
            return finish(*args, **kwargs)

        Attempt.finish = probed_finish  # type: ignore[method-assign]

    def note(self, moment: str) -> None:
        self.seen[moment] = gc_settings()
        REPORT.write_text(json.dumps(self.seen))

    def response(self, flow: http.HTTPFlow) -> None:
        self.note("response")


addons = [GcProbe()]
