"""The journal of an attempt: its events as JSON lines, written as they are captured.

See docs/architecture.md, Sessions.

A journal is what survives the proxy: `evaluator.har.load_trace` reads one
back, and a restarted `serve` offers the unfinished ones to resume
(`runs/recovery.py`). The directory's `FINISHED_INDEX` names the runs that
finished.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import IO, Any, Generic, TypeVar

from webarena_live.evaluator import EventRecord, NetworkEvent, event_to_har_entry, event_to_har_json

logger = logging.getLogger(__name__)

EntryFilter = Callable[[dict[str, Any]], dict[str, Any]]
"""Rewrites a HAR entry before it is journaled (e.g. `runs/redact.py.redact_har_entry`)."""

# ASCII escapes keep undecodable header bytes (lone surrogates) writable; one encoder, built once.
_LINE_ENCODER = json.JSONEncoder(separators=(",", ":"), check_circular=False)

_UNSAFE_FILENAME = re.compile(r"[^A-Za-z0-9_.@-]+")

_gathering: list[Journal] | None = None
"""Inside `gathered_writes`: the journals holding lines for its end (one event loop per process)."""


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

    The file is opened at the first event and written unbuffered, while the
    proxy still holds the flow's response: when the agent sees an answer, its
    event is with the operating system. A line is written as it comes, or,
    inside `gathered_writes` (the proxy's captures, `TurnWrites`), with the
    other lines of the same loop turn in one `write` before any of their
    answers goes on. No fsync: a crash of the proxy process loses nothing
    already captured (a power loss can lose what the kernel had not flushed
    yet), and `evaluator.har.load_trace` reads the file back.
    """

    def __init__(self, path: Path, *, entry_filter: EntryFilter | None = None) -> None:
        self.path = path
        self.entry_filter = entry_filter
        self._file: IO[bytes] | None = None
        self._broken = False
        self._held: list[bytes] = []
        """Lines waiting for the end of `gathered_writes`."""
        self.lines = 0
        """Lines written to the file so far."""

    def write(self, event: NetworkEvent | EventRecord, entry_json: bytes | None = None) -> None:
        """Append one line: `entry_json` when the caller already has it, else the event serialized."""
        if self._broken:
            return
        if entry_json is None:
            entry_json = entry_json_bytes(event, self.entry_filter)
        if _gathering is not None:  # written with the others at the end of `gathered_writes`
            if not self._held:
                _gathering.append(self)
            self._held.append(entry_json)
            return
        self._append(entry_json + b"\n", 1)

    def _append(self, data: bytes, lines: int) -> None:
        try:
            if self._file is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._file = self.path.open("ab", buffering=0)
            view = memoryview(data)
            while view:  # a regular file takes it whole but on a full disk: then the error comes next
                written = self._file.write(view)
                if not written:
                    raise OSError(f"the file took none of {len(view)} bytes")
                view = view[written:]
            self.lines += lines
        except OSError as error:
            # A full disk must not take the proxy down; say so once and keep serving.
            self._broken = True
            logger.error("journal %s stopped: %s", self.path, error)

    def _write_held(self) -> None:
        held, self._held = self._held, []
        if held and not self._broken:
            held.append(b"")
            self._append(b"\n".join(held), len(held) - 1)

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


@contextmanager
def gathered_writes() -> Iterator[None]:
    """Journal lines written inside are held, and each journal's written with one `write` at the end."""
    global _gathering
    if _gathering is not None:  # inside another: that one writes them
        yield
        return
    gathering: list[Journal] = []
    _gathering = gathering
    try:
        yield
    finally:
        _gathering = None
        for journal in gathering:
            journal._write_held()


Item = TypeVar("Item")


class TurnWrites(Generic[Item]):
    """The captures of one event-loop turn, recorded together right after it, their journal lines
    written with one `write` per journal (`gathered_writes`).

    `add` hands back a future the proxy's hook awaits, so a flow's answer goes on only once its
    line is written (the promise `Journal` states); the lines of a busy turn cost one system call
    instead of one each. A future per flow, not one for the turn: mitmproxy cancels the hook of a
    flow whose client left, and that cancels the future it awaits. Once the answers are released,
    `released` (if given) is told each item: what it schedules on the loop runs after the answers
    (one call per item, not a callback on each future). Outside a running loop (a unit test
    driving the hooks) an item is recorded at once, and `released` is not told.
    """

    def __init__(
        self, record: Callable[[Item], object], released: Callable[[Item], object] | None = None
    ) -> None:
        self._record = record
        self._released = released
        self._items: list[Item] = []
        self._waiting: list[asyncio.Future[None]] = []

    def add(self, item: Item) -> asyncio.Future[None] | None:
        """Record `item` right after this turn: a future done once it is (None: recorded already)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._record_all([item])
            return None
        if not self._items:
            loop.call_soon(self.flush)
        self._items.append(item)
        written = loop.create_future()
        self._waiting.append(written)
        return written

    def flush(self) -> None:
        """Record every item added so far, then release whoever awaits them."""
        items, waiting = self._items, self._waiting
        self._items, self._waiting = [], []
        try:
            self._record_all(items)
        finally:
            for written in waiting:
                if not written.done():
                    written.set_result(None)
            if self._released is not None:
                for item in items:
                    try:
                        self._released(item)
                    except Exception:  # one that fails costs no other flow its step
                        logger.exception("webarena-live: a captured flow's after-step failed")

    def _record_all(self, items: list[Item]) -> None:
        with gathered_writes():
            for item in items:
                try:
                    self._record(item)
                except Exception:  # one capture that fails costs no other flow its line
                    logger.exception("webarena-live: capturing a flow failed")
