"""An attempt's lease: the replica of each site it works on (docs/architecture.md, Replicas).

The pool that hands leases out is the control API's (`control/replicas.py`) or, with workers, the
front's; an attempt only keeps what it was given, what it did outside of it, and, on disk beside its
journal, the lease itself, so a resumed session keeps its replicas.
"""

from __future__ import annotations

import json
import logging
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

OUTSIDE_LISTED = 20
"""The requests outside its lease an attempt lists (the newest); all are counted."""


@dataclass
class AttemptLease:
    """The replicas an attempt holds: site -> replica index, and placeholder -> the replica's URL."""

    indexes: dict[str, int]
    replicas: dict[str, str]
    ended: str | None = None
    """Why the lease ended before the finish (`abandoned`, `lost`), if it did."""
    outside: int = 0
    """Requests to a replica the attempt does not hold, or to a host that is no site of the map."""
    recent_outside: deque[str] = field(default_factory=lambda: deque(maxlen=OUTSIDE_LISTED))

    def holds(self, site: str, index: int) -> bool:
        return self.indexes.get(site) == index

    def note_outside(self, method: str, url: str, why: str) -> None:
        self.outside += 1
        self.recent_outside.append(f"{method} {url} ({why})")

    def view(self) -> dict[str, Any]:
        view: dict[str, Any] = {"replicas": dict(self.replicas)}
        if self.ended:
            view["lease_ended"] = self.ended
        if self.outside:
            view["outside_lease"] = {"count": self.outside, "recent": list(self.recent_outside)}
        return view

    def record(self) -> dict[str, Any]:
        return {"indexes": self.indexes, "replicas": self.replicas}

    @classmethod
    def from_record(cls, record: Any) -> AttemptLease | None:
        if not isinstance(record, dict):
            return None
        indexes, replicas = record.get("indexes"), record.get("replicas")
        if not isinstance(indexes, dict) or not isinstance(replicas, dict):
            return None
        if not all(isinstance(k, str) and isinstance(v, int) for k, v in indexes.items()):
            return None
        return cls({k: int(v) for k, v in indexes.items()}, {str(k): str(v) for k, v in replicas.items()})


def lease_file(journal: Path) -> Path:
    """Beside a journal, the lease of its attempt: `<journal>.lease.json`."""
    return journal.with_name(journal.name + ".lease.json")


def write_lease(journal: Path, lease: AttemptLease) -> None:
    """Keep the lease beside the journal; a journal directory that cannot be written loses only this
    (the journal itself reports its own trouble)."""
    try:
        journal.parent.mkdir(parents=True, exist_ok=True)
        lease_file(journal).write_text(json.dumps(lease.record()), encoding="utf-8")
    except OSError as error:
        logger.warning("cannot keep the lease beside %s: %s", journal, error)


def read_lease(journal: Path) -> AttemptLease | None:
    """The lease kept beside `journal`; None when there is none (or it cannot be read)."""
    try:
        return AttemptLease.from_record(json.loads(lease_file(journal).read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return None
