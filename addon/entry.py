"""Load webarena-live into plain mitmproxy: `mitmdump -s addon/entry.py --set webarena_tasks=...`.

Add the session port as a second mode and name it, for example:

    mitmdump -s addon/entry.py --mode regular@8080 --mode regular@8082 \
        --set webarena_session_port=8082 --set webarena_tasks=tasks/demo.json

mitmproxy puts this file's directory, not the repository, on `sys.path`; when
webarena-live is not installed, the repository root is added so the absolute
imports below resolve.
"""

from __future__ import annotations

import sys
from pathlib import Path

try:
    import addon.live  # noqa: F401  (probe: is the package importable?)
except ModuleNotFoundError:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from addon.live import WebArenaLive

addons = [WebArenaLive()]
