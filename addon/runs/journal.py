"""The journal of an attempt: its events as JSON lines, written as they are captured.

See docs/architecture.md, Sessions.

A journal is what survives the proxy: `evaluator.har.load_trace` reads one
back, and a restarted `serve` offers the unfinished ones to resume
(`runs/recovery.py`). The directory's `FINISHED_INDEX` names the runs that
finished.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from webarena_live.evaluator import EventRecord, NetworkEvent, event_to_har_entry, event_to_har_json

logger = logging.getLogger(__name__)

EntryFilter = Callable[[dict[str, Any]], dict[str, Any]]
"""Rewrites a HAR entry before it is journaled (e.g. `runs/redact.py.redact_har_entry`)."""

# ASCII escapes keep undecodable header bytes (lone surrogates) writable; one encoder, built once.
_LINE_ENCODER = json.JSONEncoder(separators=(",", ":"), check_circular=False)

_UNSAFE_FILENAME = re.compile(r"[^A-Za-z0-9_.@-]+")


def journal_filename(session: str, task_id: int | None, when: datetime) -> str:
    """`<session>-<task id or idle>-<UTC time>.jsonl`, with the session name made filesystem-safe."""
    safe = _UNSAFE_FILENAME.sub("_", session).strip(".") or "_"
    task = "idle" if task_id is None else str(task_id)
    return f"{safe}-{task}-{when.strftime('%Y%m%dT%H%M%S.%f')}.jsonl"


def entry_json_bytes(event: NetworkEvent | EventRecord, entry_filter: EntryFilter | None = None) -> bytes:
    """The event's HAR entry as compact ASCII JSON, through `entry_filter` (redaction) if any."""
    if entry_filter is None:
        return event_to_har_json(event).encode("ascii")
    return _LINE_ENCODER.encode(entry_filter(event_to_har_entry(event))).encode("ascii")


FINISHED_INDEX = "finished.txt"
"""In a journal directory: the names of the journals whose run finished, one a line."""


class Journal:
    """Append-only JSON-lines file of one session run: each line is one event as a HAR entry.

    The file is opened at the first event and written unbuffered, one
    `write` per line, while the proxy still holds the flow's response: when
    the agent sees an answer, its event is with the operating system. No
    fsync: a crash of the proxy process loses nothing already captured (a
    power loss can lose what the kernel had not flushed yet), and
    `evaluator.har.load_trace` reads the file back.
    """

    def __init__(self, path: Path, *, entry_filter: EntryFilter | None = None) -> None:
        self.path = path
        self.entry_filter = entry_filter
        self._file: IO[bytes] | None = None
        self._broken = False
        self.lines = 0
        """Lines written to the file so far."""

    def write(self, event: NetworkEvent | EventRecord, entry_json: bytes | None = None) -> None:
        """Append one line: `entry_json` when the caller already has it, else the event serialized."""
        if self._broken:
            return
        if entry_json is None:
            entry_json = entry_json_bytes(event, self.entry_filter)
        try:
            if self._file is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._file = self.path.open("ab", buffering=0)
            self._file.write(entry_json + b"\n")
            self.lines += 1
        except OSError as error:
            # A full disk must not take the proxy down; say so once and keep serving.
            self._broken = True
            logger.error("journal %s stopped: %s", self.path, error)

    def write_resumed(self, lines: list[bytes]) -> None:
        """Write the events a resumed run starts with in one step: into a temporary file renamed onto
        the path. A process killed meanwhile leaves no journal of this run, or a whole one; never a
        part that the next resume would take, as the newest, for the run's every event."""
        if self._broken or not lines:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        try:
            with temporary.open("wb") as file:
                file.write(b"".join(line + b"\n" for line in lines))
            os.replace(temporary, self.path)
            self._file = self.path.open("ab", buffering=0)
            self.lines += len(lines)
        except OSError as error:
            self._broken = True
            temporary.unlink(missing_ok=True)
            logger.error("journal %s stopped: %s", self.path, error)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()

    def mark_finished(self) -> None:
        """Note in the directory's index that this run finished, so a restart does not offer to resume it."""
        if not self.lines:
            return
        try:
            with (self.path.parent / FINISHED_INDEX).open("a", encoding="utf-8") as index:
                index.write(self.path.name + "\n")
        except OSError as error:
            logger.error("journal index %s: %s", self.path.parent / FINISHED_INDEX, error)
            self._file = None
