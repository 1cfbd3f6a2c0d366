"""The faults made on purpose in an attempt's traffic (`proxy/faults.py`), journaled beside its journal.

A run resumed from its journal after a crash or a worker's restart goes on with them: its finish still
tells them from the sites' own failures (`site_errors`, `sites_answered`), and lists them all.

`<journal file name>.faults` holds one JSON line per fault, written as the fault is made, before the
flow goes on: the fault as listed (`fault`) and what its draw counted (`drawn`: the method, the URL as
the site map writes it, and how many such requests came before). A fault whose record changed as it
ended (a `latency` its client gave up on: `failing`) is written again, its draw with its new record and
`"ended": true`: read back, that line's record replaces its draw's, listed where it was. A resumed run
keeps the faults whose request is in the journal (a request cut off by the crash is sent again, and
draws again) and begins its own file with them, written whole at once, as its journal is
(`Journal.write_resumed`). The name does not end in `.jsonl`, so no reader of the journal directory
takes it for a journal.

The file is a help to the resumed run, never a reason to refuse it: a line that cannot be read is left
out with a warning.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from webarena_live.evaluator import NetworkEvent, SiteMap
from webarena_live.runs.fault_plan import site_and_path

logger = logging.getLogger(__name__)

FAULTS_SUFFIX = ".faults"
_LISTED = ("fault", "method", "url")
"""What every listed fault has (`fault_record`): the finish reads them."""


@dataclass(frozen=True)
class FaultLine:
    """One fault as journaled: the record listed, and the inputs of the draw that made it."""

    record: dict[str, Any]
    method: str
    url: str
    """As the site map writes it (`__SHOPPING__/p/1`)."""
    seen: int
    """Requests of the same method and URL the attempt sent before this one."""

    def to_line(self, *, ended: bool = False) -> bytes:
        """Its line; `ended`: the fault's record as it ended, replacing what its draw's line said."""
        drawn = {"method": self.method, "url": self.url, "seen": self.seen}
        data = {"fault": self.record, "drawn": drawn, **({"ended": True} if ended else {})}
        return json.dumps(data, separators=(",", ":")).encode() + b"\n"


def faults_path(journal: Path) -> Path:
    """Where the faults of the run journaled in `journal` are."""
    return journal.with_name(journal.name + FAULTS_SUFFIX)


def read_fault_log(journal: Path) -> list[FaultLine]:
    """The faults journaled beside `journal`, in order (none when it has no faults file). A last line
    cut short by a crash is left out; a damaged line, or a file that cannot be read, with a warning."""
    path = faults_path(journal)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    except OSError as error:
        logger.warning("faults journal %s cannot be read: %s; resumed without its faults", path, error)
        return []
    lines = data.split(b"\n")
    read: list[FaultLine] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        found = _fault_line(line)
        if found is None:
            if number < len(lines):  # the last one, with no newline after it, is a write a crash cut short
                logger.warning("faults journal %s, line %d: not a fault as journaled; left out", path, number)
            continue
        fault, ended = found
        drawn = (fault.method, fault.url, fault.seen)
        earlier = next((n for n, f in enumerate(read) if (f.method, f.url, f.seen) == drawn), None)
        if ended and earlier is not None:
            read[earlier] = fault  # the fault as it ended, where it was listed
        else:
            read.append(fault)
    return read


def _fault_line(line: bytes) -> tuple[FaultLine, bool] | None:
    """The fault a line holds, and whether it is one as it ended (`"ended": true`)."""
    try:
        data = json.loads(line)
        record, drawn, ended = data["fault"], data["drawn"], data.get("ended") is True
        if not (isinstance(record, dict) and all(isinstance(record.get(key), str) for key in _LISTED)):
            return None
        method, url, seen = drawn["method"], drawn["url"], drawn["seen"]
    except (ValueError, TypeError, KeyError):
        return None
    if not (isinstance(method, str) and isinstance(url, str) and type(seen) is int):
        return None
    return FaultLine(record, method, url, seen), ended


def requests_sent(events: Iterable[NetworkEvent], site_map: SiteMap) -> dict[tuple[str, str], int]:
    """How many requests of each method and URL (as the site map writes it) to the sites `events` hold:
    what a resumed run's draws go on counting from."""
    sent: dict[tuple[str, str], int] = {}
    for event in events:
        derendered = site_map.derender(event.url, strict=False)
        if site_and_path(derendered) is not None:
            key = (event.method, derendered)
            sent[key] = sent.get(key, 0) + 1
    return sent


def journaled_faults(lines: list[FaultLine], sent: dict[tuple[str, str], int]) -> list[FaultLine]:
    """The faults whose request is among `sent` (the journal's): a request cut off by the crash is not,
    and its fault is drawn again when the agent sends it again."""
    return [line for line in lines if line.seen < sent.get((line.method, line.url), 0)]


class FaultLog:
    """The faults file of one attempt's journal. A write that fails is told once, and the proxy goes
    on serving (as the journal does on a full disk)."""

    def __init__(self, journal: Path) -> None:
        self.path = faults_path(journal)
        self._broken = False
        self._opened = False
        """Written to by this attempt: a file found at its path before is no part of it."""

    def append(self, line: FaultLine, *, ended: bool = False) -> None:
        """One fault, as it is made (`ended`: again, as it ended)."""
        if self._write(line.to_line(ended=ended), "ab" if self._opened else "wb"):
            self._opened = True

    def write_resumed(self, lines: list[FaultLine]) -> None:
        """The faults a resumed run begins with, in one step: a temporary file renamed onto the path (with
        none, a file an earlier try of the same resume left there is removed)."""
        if not lines:
            try:
                self.path.unlink(missing_ok=True)
            except OSError as error:
                self._stop(error)
            return
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        if self._write(b"".join(line.to_line() for line in lines), "wb", to=temporary):
            try:
                os.replace(temporary, self.path)
                self._opened = True
            except OSError as error:
                temporary.unlink(missing_ok=True)
                self._stop(error)

    def _write(self, data: bytes, mode: str, *, to: Path | None = None) -> bool:
        if self._broken:
            return False
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with (to or self.path).open(mode) as file:
                file.write(data)
            return True
        except OSError as error:
            if to is not None:
                to.unlink(missing_ok=True)
            self._stop(error)
            return False

    def _stop(self, error: OSError) -> None:
        self._broken = True
        logger.error("faults journal %s stopped: %s", self.path, error)
