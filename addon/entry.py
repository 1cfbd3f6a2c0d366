"""Load webarena-live into plain mitmproxy: `mitmdump -s addon/entry.py --set webarena_tasks=...`.

Add the session port as a second mode and name it, for example:

    mitmdump -s addon/entry.py --mode regular@8080 --mode regular@8082 \
        --set webarena_session_port=8082 --set webarena_tasks=tasks/demo.json

mitmproxy puts this file's directory, not the repository, on `sys.path`; when
webarena-live is not installed, the repository root is added so the absolute
imports below resolve.

The line before the last is for speed. For every event of every flow mitmproxy looks
the hook up by name on this module as well as on the addon (the module is a
node of its addon tree). A module answers a name it lacks with a formatted
AttributeError, about 0.9 µs, and a flow passes eight such lookups; naming
each hook None (to mitmproxy: no handler here) makes them dictionary hits.
Measured with callgrind: 100,000 fewer instructions per proxied request,
1.2% of mitmproxy's own work (docs/notes/performance.md).
"""

from __future__ import annotations

import sys
from pathlib import Path

try:
    import addon.live  # noqa: F401  (probe: is the package importable?)
except ModuleNotFoundError:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mitmproxy import hooks

from addon.live import WebArenaLive

globals().update(dict.fromkeys(hooks.all_hooks.keys() - globals().keys()))

addons = [WebArenaLive()]
