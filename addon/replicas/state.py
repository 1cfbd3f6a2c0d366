"""The bookkeeping of the replica pool (`replicas/pool.py`): one replica's state, one mutation seen
through the proxy, and a site's reset counters (the lease is `replicas/lease.py`)."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from webarena_live.replicas.health import ReplicaHealth

if TYPE_CHECKING:
    from webarena_live.replicas.ways import ResetWay

MUTATIONS_KEPT = 10_000
"""Mutations remembered per replica (the oldest go first); a session's interference reads them."""
RESETS_KEPT = 20
"""Resets a replica's view lists (the newest), for `/health` and the dashboard."""


@dataclass(frozen=True)
class Mutation:
    """A request that may have changed a replica, as the proxy saw it."""

    session: str
    method: str
    url: str
    time: float
    seq: int = 0

    def view(self) -> dict[str, Any]:
        return {"session": self.session, "method": self.method, "url": self.url, "time": self.time}


@dataclass
class ReplicaState:
    site: str
    index: int
    url: str
    reset_url: str | None
    probe_url: str | None = None
    """Where a probe asks whether it is up: its `health_url`, else its start URL."""
    checked: bool = False
    """Whether it has a `health_url` of its own: then every reset of it is probed too."""
    way: ResetWay | None = None
    """How it is made new (`replicas/reset.py`): its reset endpoint, a new container, ...; None: it
    cannot be reset."""
    reset_started: float | None = None
    """When the reset running now started (None when none runs): a refusal says how long it has run."""
    holders: dict[str, bool] = field(default_factory=dict)
    """The sessions leasing it now, and whether each one's task mutates."""
    dirty: bool = False
    """Received a mutation since its last reset (or since the start)."""
    resetting: bool = False
    out_of_service: str | None = None
    """Why it is out of service (its last reset or probe failed); None when it is not."""
    failing: str | None = None
    """Why its recent judged answers say it is failing (`health`); None while they do not."""
    health: ReplicaHealth = field(default_factory=ReplicaHealth)
    """Its recent judged answers, across sessions (`replicas/health.py`)."""
    mutations: deque[Mutation] = field(default_factory=lambda: deque(maxlen=MUTATIONS_KEPT))
    resets: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=RESETS_KEPT))
    """Its resets, newest last: when, after which session (or why), how long, and how it went."""

    @property
    def leasable(self) -> bool:
        return not (self.resetting or self.out_of_service or self.failing)

    def view(self) -> dict[str, Any]:
        state = (
            "out_of_service" if self.out_of_service else "resetting" if self.resetting
            else "failing" if self.failing else "leased" if self.holders else "dirty" if self.dirty
            else "free"
        )  # fmt: skip
        view: dict[str, Any] = {"index": self.index, "url": self.url, "state": state,
                                "sessions": sorted(self.holders)}  # fmt: skip
        if self.out_of_service:
            view["reason"] = self.out_of_service
        if self.failing:
            view["failing"] = self.failing
        if self.health.answers:
            view["health"] = self.health.view()
        if self.resets:
            view["resets"] = list(self.resets)
        return view

    def in_words(self) -> str:
        """One replica's state as a refusal names it: `replica 0 held by 2 readers (a, b)`."""
        name = f"replica {self.index}"
        if self.out_of_service:
            return f"{name} out of service (its reset failed: {self.out_of_service})"
        if self.resetting:
            return f"{name} {self._reset_in_words()}"
        if self.failing:
            return f"{name} failing ({self.failing})"
        writers = sorted(s for s, mutating in self.holders.items() if mutating)
        if writers:
            return f"{name} held by a mutating task (session {', '.join(writers)})"
        if self.holders:
            count = len(self.holders)
            who = ", ".join(sorted(self.holders))
            return f"{name} held by {count} reader{'s' if count > 1 else ''} ({who})"
        if self.dirty:
            return f"{name} changed, waiting for its reset"
        return f"{name} free"

    def _reset_in_words(self) -> str:
        """`resetting (a new container, for 12 s; the last took 41 s)`: how long until it is back."""
        what = "a new container" if self.way is not None and self.way.kind == "recreate" else None
        parts = [what] if what else []
        if self.reset_started is not None:
            parts.append(f"for {time.time() - self.reset_started:.0f} s")
        last = _last_seconds(self.resets)
        if last is not None:
            parts.append(f"the last took {last:.0f} s")
        return "resetting" + (f" ({'; '.join(parts)})" if parts else "")


def _last_seconds(resets: deque[dict[str, Any]]) -> float | None:
    done = [r["seconds"] for r in resets if r.get("ok") and isinstance(r.get("seconds"), int | float)]
    return done[-1] if done else None


@dataclass
class SiteCounters:
    resets: int = 0
    """Resets that succeeded."""
    skipped: int = 0
    """Releases that needed no reset: the replica saw only reads."""
    failed: int = 0
    seconds: float = 0.0
    """Seconds spent in reset endpoints, all resets together."""
