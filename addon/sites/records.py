"""What the keeper remembers of its copies across restarts (`<state dir>/copies.json`): each container
it made, by engine and name, and whether it changed since. A restarted `serve` adopts a running copy only
when it made that very container and nothing changed it; any other container under a copy's name
(unknown, changed, made from another plan) is made again, so no copy is called new on a guess."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from webarena_live.evaluator import write_json_atomically
from webarena_live.sites.plan import CopyPlan

logger = logging.getLogger("webarena_live.sites")

RECORDS_FILE = "copies.json"


class CopyRecords:
    """The keeper's memory: `{"<engine> <name>": {"id": ..., "changed": bool}}`, written atomically at
    every change (a SIGKILL loses nothing told before it)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._records: dict[str, dict[str, Any]] = {}
        if path is not None and path.exists():
            try:
                loaded = json.loads(path.read_text(encoding="utf-8"))
                self._records = loaded if isinstance(loaded, dict) else {}
            except (OSError, ValueError) as error:  # then every copy is made again: nothing trusted
                logger.warning("cannot read %s (%s): every running copy is made again", path, error)

    @staticmethod
    def key(copy: CopyPlan) -> str:
        return f"{copy.engine} {copy.name}"

    def fresh(self, copy: CopyPlan, container_id: str) -> bool:
        """Whether `container_id` is the container made for `copy` and unchanged since."""
        record = self._records.get(self.key(copy))
        return (
            isinstance(record, dict) and record.get("id") == container_id and record.get("changed") is False
        )

    def made(self, copy: CopyPlan, container_id: str) -> None:
        self._records[self.key(copy)] = {"id": container_id, "changed": False}
        self._write()

    def changed(self, copy: CopyPlan) -> None:
        record = self._records.get(self.key(copy))
        if isinstance(record, dict) and record.get("changed") is False:
            record["changed"] = True
            self._write()

    def forget(self, copy: CopyPlan) -> None:
        if self._records.pop(self.key(copy), None) is not None:
            self._write()

    def _write(self) -> None:
        if self.path is None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_json_atomically(self.path, self._records)
        except OSError as error:
            logger.warning("cannot keep the copies' records in %s: %s", self.path, error)
