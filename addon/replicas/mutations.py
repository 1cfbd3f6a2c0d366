"""The mutation log: every request through a proxy that may have changed a replica, in order.

Whoever sees the traffic keeps one: the single process and each worker of `serve --workers`. It only
records; the pool (`replicas/pool.py`) that leases reads from it: in one process the log hands each
mutation to its pool as it is recorded (`listen`), and a fleet's front reads every worker's log over
HTTP (`GET /mutations`, `mutations_after`) and hands what it gathers to its own pool (`ReplicaPool.take`).
`record` is the one place where a request is judged a possible change of a replica.
See docs/architecture.md, Replicas.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import Any

from webarena_live.evaluator import SiteMap, placeholder
from webarena_live.replicas.state import MUTATIONS_KEPT, Mutation

MUTATING_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
"""The methods that may change a site (the trace's mutation events are the same)."""

Listener = Callable[[str, int, Mutation], None]
"""Told `(site, replica index, mutation)` for each mutation recorded."""


class MutationLog:
    """The mutations seen on `site_map`'s replicas, numbered from 1 (`seq`), the newest kept."""

    def __init__(self, site_map: SiteMap) -> None:
        self.site_map = site_map
        self._seq = 0
        self._log: deque[tuple[int, str, int, Mutation]] = deque(maxlen=MUTATIONS_KEPT)
        self._listeners: list[Listener] = []

    def listen(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def record(self, url: str, session: str, method: str, when: float | None = None) -> Mutation | None:
        """A request through the proxy (any session's, inside its lease or not). One that may change a
        replica is logged and told to the listeners; None when it changes nothing the map knows of."""
        if method.upper() not in MUTATING_METHODS:
            return None
        found = self.site_map.replicas_of(url)
        if not found:
            return None
        site, index = found[0]
        self._seq += 1
        mutation = Mutation(session, method.upper(), url, time.time() if when is None else when, self._seq)
        self._log.append((self._seq, site, index, mutation))
        for listener in self._listeners:
            listener(site, index, mutation)
        return mutation

    def mutations_after(self, seq: int) -> list[dict[str, Any]]:
        """The mutations recorded after `seq`, oldest first (what a fleet's front asks its workers)."""
        return [
            {"seq": s, "site": placeholder(site), "index": index, **mutation.view()}
            for s, site, index, mutation in self._log
            if s > seq
        ]
