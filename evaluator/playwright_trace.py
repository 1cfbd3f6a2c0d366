"""Playwright traces (`trace.zip`, a trace directory, or its `trace.network` file).

Playwright's tracer writes one JSON object per line; network exchanges are the
lines of type `resource-snapshot`, whose `snapshot` is a HAR entry. Bodies are
stored beside it (as `resources/<sha1>`), not inline; the reference does not
read them, and neither does this loader, so verdicts stay comparable.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

from webarena_live.evaluator.errors import TraceFormatError
from webarena_live.evaluator.har_import import events_from_entries
from webarena_live.evaluator.trace import NetworkTrace

NETWORK_FILE = "trace.network"


def parse_network_log(text: str, *, source: str) -> NetworkTrace:
    """The events of a `trace.network` text: its resource-snapshot lines, in order."""
    items = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError as error:
            raise TraceFormatError(f"{source}: line {number} is not JSON: {error}") from None
        if not isinstance(item, dict) or "type" not in item:
            raise TraceFormatError(f"{source}: line {number} is not a Playwright trace event")
        items.append(item)
    return events_from_entries(items, source=source, browser_view=False)  # the browser's own recording


def _read_zip(path: Path) -> str:
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
            # The reference reads exactly `trace.network`; traces of several contexts use `N-trace.network`.
            member = (
                NETWORK_FILE
                if NETWORK_FILE in names
                else next((name for name in names if name.endswith(".network")), None)
            )
            if member is None:
                raise TraceFormatError(f"{path}: the Playwright trace holds no {NETWORK_FILE}")
            return archive.read(member).decode("utf-8", errors="ignore")
    except zipfile.BadZipFile as error:
        raise TraceFormatError(f"{path}: not a zip archive: {error}") from None


def load_playwright_trace(path: str | Path) -> NetworkTrace:
    """Events of a Playwright trace: a `.zip`, a directory holding `trace.network`, or that file."""
    file = Path(path)
    if file.suffix == ".zip":
        text = _read_zip(file)
    else:
        network = file / NETWORK_FILE if file.is_dir() else file
        if not network.exists():
            raise TraceFormatError(f"{network}: Playwright trace file not found")
        try:
            text = network.read_text(encoding="utf-8", errors="ignore")
        except OSError as error:
            raise TraceFormatError(f"{network}: cannot read trace: {error.strerror or error}") from None
    return parse_network_log(text, source=str(file))
