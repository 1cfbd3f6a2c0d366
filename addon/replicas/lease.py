"""A lease: the replica of each site a session works on (docs/architecture.md, Replicas).

One record, shared: the pool (`replicas/pool.py`) hands it out and ends it; the session's attempt
(`runs/attempt.py`) holds the very same object and shows it, adds what the session did outside of it,
and keeps it on disk beside its journal, so a resumed session takes its replicas back. Under
`serve --workers` the front's pool holds the leases; a worker builds the attempt's record from the
lease the front gave (`lease_of`).
"""

from __future__ import annotations

import json
import logging
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from webarena_live.evaluator import SiteMap, placeholder

logger = logging.getLogger(__name__)

OUTSIDE_LISTED = 20
"""The requests outside its lease an attempt lists (the newest); all are counted."""


@dataclass
class Lease:
    """The replicas a session holds: site -> replica index, and placeholder -> the replica's URL."""

    indexes: dict[str, int]
    replicas: dict[str, str]
    session: str = ""
    task_id: int | None = None
    mutating: bool = False
    started: float = field(default_factory=time.time)
    touched: float = field(default_factory=time.time)
    """When the session last used it: a request through the proxy or a control call (`touch`);
    `--lease-timeout` counts from here."""
    ended: str | None = None
    """Why the lease ended (`finished`, `abandoned`, `timeout`, `lost`, `refused`, ...), once it did."""
    ended_detail: str | None = None
    """The reason given with `POST /sessions/{s}/abandon`, if any."""
    ended_at: float | None = None
    refused_after_end: int = 0
    """Requests the proxy answered itself because the lease had ended before the finish."""
    outside: int = 0
    """Requests to a replica the session does not hold, or to a host that is no site of the map."""
    recent_outside: deque[str] = field(default_factory=lambda: deque(maxlen=OUTSIDE_LISTED))

    def touch(self, when: float | None = None) -> None:
        self.touched = max(self.touched, time.time() if when is None else when)

    def end(self, reason: str, detail: str | None = None) -> None:
        """Mark the lease ended (the pool gives its replicas back itself); the first reason stays."""
        if self.ended is None:
            self.ended, self.ended_detail, self.ended_at = reason, detail, time.time()

    def holds(self, site: str, index: int) -> bool:
        return self.indexes.get(site) == index

    def note_outside(self, method: str, url: str, why: str) -> None:
        self.outside += 1
        self.recent_outside.append(f"{method} {url} ({why})")

    @property
    def ended_early(self) -> str | None:
        """Why the lease ended before its session's finish (a finish ends it as `finished`)."""
        return self.ended if self.ended != "finished" else None

    def view(self) -> dict[str, Any]:
        view: dict[str, Any] = {"replicas": dict(self.replicas)}
        if self.ended_early:
            view["lease_ended"] = self.ended_early
            if self.ended_detail:
                view["lease_ended_reason"] = self.ended_detail
            view["refused_after_lease_end"] = self.refused_after_end
        if self.outside:
            view["outside_lease"] = {"count": self.outside, "recent": list(self.recent_outside)}
        return view

    def record(self) -> dict[str, Any]:
        record: dict[str, Any] = {"indexes": self.indexes, "replicas": self.replicas}
        if self.ended_early:
            record.update(ended=self.ended, ended_reason=self.ended_detail, ended_at=self.ended_at)
        return record

    @classmethod
    def from_record(cls, record: Any) -> Lease | None:
        if not isinstance(record, dict):
            return None
        indexes, replicas = record.get("indexes"), record.get("replicas")
        if not isinstance(indexes, dict) or not isinstance(replicas, dict):
            return None
        if not all(isinstance(k, str) and isinstance(v, int) for k, v in indexes.items()):
            return None
        lease = cls({k: int(v) for k, v in indexes.items()}, {str(k): str(v) for k, v in replicas.items()})
        if isinstance(record.get("ended"), str):
            detail = record.get("ended_reason")
            lease.end(record["ended"], detail if isinstance(detail, str) else None)
        return lease


def replica_urls(site_map: SiteMap, indexes: dict[str, int]) -> dict[str, str]:
    """The lease as an agent reads it: placeholder -> its replica's URL."""
    return {placeholder(site): site_map.environments[site].replicas[i].url for site, i in indexes.items()}


def lease_of(site_map: SiteMap, indexes: dict[str, int], session: str = "") -> Lease:
    """The record of a lease given elsewhere (a fleet's front); `ValueError` when `indexes` names a site
    or a replica `site_map` does not have."""
    for site, index in indexes.items():
        env = site_map.environments.get(site)
        if env is None or not 0 <= index < len(env.replicas):
            raise ValueError(f"{site} replica {index}")
    return Lease(dict(indexes), replica_urls(site_map, indexes), session=session)


class LeaseUse:
    """The leases used in this process (a request through the proxy or a control call), the most
    recently used last: what `GET /mutations` tells a fleet's front, so its `--lease-timeout` counts idle
    time from the last use anywhere. Marking a use moves one entry; telling the uses since a moment
    reads only those (newest first, until an older one), not every session."""

    def __init__(self) -> None:
        self._leases: OrderedDict[str, Lease] = OrderedDict()

    def used(self, name: str, lease: Lease) -> None:
        lease.touch()
        self._leases[name] = lease
        self._leases.move_to_end(name)

    def since(self, after: float | None = None) -> dict[str, float]:
        """Session -> when it last used its lease, for the leases not ended used at or after `after`
        (all of them without it); the ended ones met on the way are forgotten."""
        found: dict[str, float] = {}
        ended: list[str] = []
        for name in reversed(self._leases):
            lease = self._leases[name]
            if after is not None and lease.touched < after:
                break
            if lease.ended is not None:
                ended.append(name)
            else:
                found[name] = lease.touched
        for name in ended:
            del self._leases[name]
        return found


def lease_file(journal: Path) -> Path:
    """Beside a journal, the lease of its attempt: `<journal>.lease.json`."""
    return journal.with_name(journal.name + ".lease.json")


def write_lease(journal: Path, lease: Lease) -> None:
    """Keep the lease beside the journal; a journal directory that cannot be written loses only this
    (the journal itself reports its own trouble)."""
    try:
        journal.parent.mkdir(parents=True, exist_ok=True)
        lease_file(journal).write_text(json.dumps(lease.record()), encoding="utf-8")
    except OSError as error:
        logger.warning("cannot keep the lease beside %s: %s", journal, error)


def read_lease(journal: Path) -> Lease | None:
    """The lease kept beside `journal`; None when there is none (or it cannot be read)."""
    try:
        return Lease.from_record(json.loads(lease_file(journal).read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return None
