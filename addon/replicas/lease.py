"""A lease, the replica of each site a session works on (`Lease`), why one ends (`EndReason`), and the
leases used in this process (`LeaseUse`). How a lease lives and ends: docs/architecture.md, Leases.
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from webarena_live.evaluator import SiteMap, placeholder


class EndReason(StrEnum):
    """Why a lease ended (`ReplicaPool.end_lease`): the same word in the lease book, on the wire and in a
    finish's `lease_ended`."""

    FINISHED = "finished"
    RESTARTED = "restarted"
    """A new start of the session's name: its earlier attempt's lease is over."""
    REFUSED = "refused"
    """Its start did not go on: nobody used it."""
    RESET_FAILED = "reset failed"
    """The reset its start asked for (`"reset": true`) failed."""
    ABANDONED = "abandoned"
    TIMEOUT = "timeout"
    """Idle past `--lease-timeout`."""
    LOST = "lost"
    """Its worker or node was lost."""


FORGOTTEN = frozenset({EndReason.FINISHED, EndReason.RESTARTED, EndReason.REFUSED, EndReason.RESET_FAILED})
"""Ends after which a session's lease is not remembered: it finished, or its start did not go on (a new
start, a refused one). Any other end (`abandoned`, `timeout`, `lost`) is remembered for a resume."""
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
    ended: EndReason | None = None
    """Why the lease ended, once it did."""
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

    def _close(self, reason: EndReason, detail: str | None, at: float | None = None) -> None:
        """The record's side of an end (`ReplicaPool.end_lease` ends a lease); the first reason stays."""
        if self.ended is None:
            self.ended, self.ended_detail = reason, detail
            self.ended_at = time.time() if at is None else at

    def copy_end(self, reason: EndReason, detail: str | None = None, at: float | None = None) -> None:
        """A worker's view takes the end its front's pool wrote (a lease ends in the pool alone)."""
        self._close(reason, detail, at)

    def holds(self, site: str, index: int) -> bool:
        return self.indexes.get(site) == index

    def note_outside(self, method: str, url: str, why: str) -> None:
        self.outside += 1
        self.recent_outside.append(f"{method} {url} ({why})")

    @property
    def ended_early(self) -> EndReason | None:
        """Why the lease ended before its session's finish (a finish ends it as `finished`)."""
        return self.ended if self.ended != EndReason.FINISHED else None

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
