"""The faults made on purpose in an attempt's traffic (`proxy/faults.py`), journaled beside its journal.

A run resumed from its journal after a crash or a worker's restart goes on with them: its finish still
tells them from the sites' own failures (`site_errors`, `sites_answered`), and lists them all.

`<journal file name>.faults` holds one JSON line per fault, written as the fault is made, before the
flow goes on. A resumed run reads its predecessor's file and begins its own with those lines, written
whole at once, as its journal is (`Journal.write_resumed`). The name does not end in `.jsonl`, so no
reader of the journal directory takes it for a journal.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from webarena_live.evaluator import WebArenaLiveError

logger = logging.getLogger(__name__)

FAULTS_SUFFIX = ".faults"


class FaultLogError(WebArenaLiveError):
    """A journal's faults file cannot be read back."""


def faults_path(journal: Path) -> Path:
    """Where the faults of the run journaled in `journal` are."""
    return journal.with_name(journal.name + FAULTS_SUFFIX)


def read_fault_log(journal: Path) -> list[dict[str, Any]]:
    """The faults journaled beside `journal`, in order: none when it has no faults file; a last line
    cut short by a crash is left out, any other damage raises `FaultLogError`."""
    path = faults_path(journal)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    except OSError as error:
        raise FaultLogError(f"cannot read {path}: {error}") from None
    lines = data.split(b"\n")
    records: list[dict[str, Any]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            if number == len(lines):  # no newline after it: the write a crash cut short
                break
            raise FaultLogError(f"{path}, line {number}: not a JSON object") from None
        if not isinstance(record, dict):
            raise FaultLogError(f"{path}, line {number}: not a JSON object")
        records.append(record)
    return records


class FaultLog:
    """The faults file of one attempt's journal. A write that fails is told once, and the proxy goes
    on serving (as the journal does on a full disk)."""

    def __init__(self, journal: Path) -> None:
        self.path = faults_path(journal)
        self._broken = False

    def append(self, record: dict[str, Any]) -> None:
        """One fault, as it is made."""
        self._write(json.dumps(record, separators=(",", ":")).encode() + b"\n", "ab")

    def write_resumed(self, records: list[dict[str, Any]]) -> None:
        """The faults a resumed run begins with, in one step: a temporary file renamed onto the path."""
        if not records:
            return
        data = b"".join(json.dumps(record, separators=(",", ":")).encode() + b"\n" for record in records)
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        if self._write(data, "wb", to=temporary):
            try:
                os.replace(temporary, self.path)
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
