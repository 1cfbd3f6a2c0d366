"""Who holds what in the replica pool (`Holding`): the leases held, ended and suspended, the replica that
fits a start under the sharing policy, and the mutations each replica saw, which make a session's
interference. Pure and synchronous: no event loop, no notice, no reset. `ReplicaPool`
(`replicas/pool.py`) is a `Holding` that also cares for its copies (`replicas/resetting.py`). How a lease
lives and ends: docs/architecture.md, Leases.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from dataclasses import replace
from typing import Any

from webarena_live.evaluator import placeholder
from webarena_live.replicas.lease import FORGOTTEN, EndReason, Lease
from webarena_live.replicas.lease_book import LeaseBook
from webarena_live.replicas.policy import Isolation
from webarena_live.replicas.records import Interference
from webarena_live.replicas.state import Mutation, ReplicaState


class Holding:
    """Every site's replicas and who holds them. Each lease is on disk (`book`) before it is anywhere
    else."""

    def __init__(
        self,
        replicas: dict[str, list[ReplicaState]],
        isolation: Isolation,
        ceilings: Mapping[str, int] | None,
    ) -> None:
        self.replicas = replicas
        self.isolation = isolation
        """The sharing policy (`--isolation`): who may hold a replica with whom."""
        self.ceilings = dict(ceilings or {})
        """Per site, how many of its replicas may be held at once (the others are spares kept fresh);
        a site not named: all of them."""
        self.leases: dict[str, Lease] = {}
        """The leases held now, by session."""
        self.ended: dict[str, Lease] = {}
        """The leases that ended before their session finished, by session: a resume gets them back
        ended (a finish, or a new start of the name, forgets them)."""
        self.suspended: dict[str, Lease] = {}
        """Leases held when the last `serve` stopped, by session: they hold no replica until their session
        is resumed (`lease(..., resume=True)`), which takes them back where they fit."""
        self.book = LeaseBook()
        """Every lease's record on disk (`lease_book.py`), when the pool has a state file."""
        self.seq = 0
        """The last mutation taken, in the pool's own order (a worker's numbers are its own)."""

    def _restore_leases(self) -> None:
        """The leases the book keeps: ended ones stay ended, held ones come back suspended (when their
        replicas are still in the map)."""
        for session, lease in self.book.all().items():
            if lease.ended is not None:
                self.ended[session] = lease
            elif all(s in self.replicas and 0 <= i < len(self.replicas[s]) for s, i in lease.indexes.items()):
                self.suspended[session] = lease

    # --- where a start fits ----------------------------------------------------------------------------

    def _choose(
        self, sites: tuple[str, ...], mutating: bool, kept: dict[str, int] | None = None
    ) -> dict[str, int] | None:
        """A fitting replica per site: the one `kept` names when it fits, else the best; None when a
        site has none."""
        chosen = {}
        for site in sites:
            fitting = [r for r in self.replicas[site] if self._fits(r, mutating)]
            ceiling = self.ceilings.get(site)
            if ceiling is not None and sum(1 for r in self.replicas[site] if r.holders) >= ceiling:
                fitting = [r for r in fitting if r.holders]  # the rest are spares: only shared ones
            if not fitting:
                return None
            mine = [r for r in fitting if kept is not None and kept.get(site) == r.index]
            chosen[site] = (mine[0] if mine else self._best(fitting, mutating)).index
        return chosen

    def _best(self, fitting: list[ReplicaState], mutating: bool) -> ReplicaState:
        """The least busy of `fitting`; under `readers`, a read-only task joins a replica other readers
        hold before it takes a free one: readers pack, and the free copies stay free for mutating tasks."""
        least_busy = min(fitting, key=lambda r: (len(r.holders), r.dirty, r.index))
        if self.isolation is not Isolation.READERS or mutating:
            return least_busy
        shared = [r for r in fitting if r.holders]
        if shared:
            return min(shared, key=lambda r: (len(r.holders), r.index))
        return least_busy

    def _fits(self, replica: ReplicaState, mutating: bool) -> bool:
        if self.isolation is Isolation.NONE:  # a reset after a restart is waited for, whatever the policy
            return not (replica.resetting or replica.out_of_service)
        if not replica.leasable or replica.dirty:  # a changed replica is reset before its next lease
            return False
        if self.isolation is Isolation.EXCLUSIVE or mutating:
            return not replica.holders
        return not any(replica.holders.values())  # readers share what no mutating session holds

    # --- a lease's grant and end -----------------------------------------------------------------------

    def _grant(self, session: str, task_id: int, mutating: bool, chosen: dict[str, int]) -> Lease:
        lease = Lease(chosen, self._urls(chosen), session=session, task_id=task_id, mutating=mutating)
        self.book.write(lease)  # on disk before anyone sees it
        self.suspended.pop(session, None)
        self.leases[session] = lease
        for replica in self.leased(lease):
            replica.holders[session] = mutating
        return lease

    def _forget(self, session: str) -> None:
        """A new start (or the finish) of `session`: its earlier attempt's lease is no longer resumable."""
        if self.ended.pop(session, None) is not None or self.suspended.pop(session, None) is not None:
            self.book.drop(session)

    def _release(self, session: str, reason: EndReason, detail: str | None) -> tuple[Lease | None, bool]:
        """The holding's side of an end (`ReplicaPool.end_lease`): the end on disk first, then the lease
        off its replicas. The lease ended (None when there was none) and whether it held replicas (a
        suspended one holds none: it ends as it is)."""
        if reason in FORGOTTEN:
            self._forget(session)
        elif (suspended := self.suspended.pop(session, None)) is not None:
            suspended._close(reason, detail)
            self.book.write(suspended)
            self.ended[session] = suspended
            return suspended, False
        lease = self.leases.pop(session, None)
        if lease is None:
            return None, False
        lease._close(reason, detail)
        if reason in FORGOTTEN:  # a refused start's lease was never used: it leaves nothing on disk
            self.book.drop(session, granted_last=reason == EndReason.REFUSED)
        else:
            self.book.write(lease)
            self.ended[session] = lease
        for replica in self.leased(lease):
            replica.holders.pop(session, None)
        return lease, True

    def _idle(self, now: float, timeout: float, keep: Collection[str]) -> list[str]:
        """The sessions whose lease was last used more than `timeout` seconds before `now`, but those in
        `keep`."""
        return [s for s, lease in self.leases.items() if now - lease.touched > timeout and s not in keep]

    def _urls(self, indexes: dict[str, int]) -> dict[str, str]:
        return {placeholder(site): self.replicas[site][index].url for site, index in indexes.items()}

    def leased(self, lease: Lease) -> Iterator[ReplicaState]:
        for site, index in lease.indexes.items():
            yield self.replicas[site][index]

    # --- mutations and interference --------------------------------------------------------------------

    def _mark(self, site: str, index: int, mutation: Mutation) -> tuple[ReplicaState, bool]:
        """The holding's side of a mutation on replica `index` of `site` (`ReplicaPool.take`): it marks the
        replica changed and counts in the interference of whoever else holds it. The replica, and
        whether it is the replica's first change since its last reset."""
        self.seq += 1
        replica = self.replicas[site][index]
        replica.mutations.append(replace(mutation, seq=self.seq))
        first, replica.dirty = not replica.dirty, True
        return replica, first

    def interference_record(self, session: str, *, since: float | None = None) -> Interference:
        """The mutations other sessions made on `session`'s replicas while it held them (since `since`,
        else since its lease started), every one listed: `exposed` when there is at least one."""
        lease = self.leases.get(session)
        if lease is None:
            return Interference.none()
        start = lease.started if since is None else since
        others = sorted(
            (m for replica in self.leased(lease) for m in replica.mutations
             if m.session != session and m.time >= start),
            key=lambda m: m.time,
        )  # fmt: skip
        return Interference.of(others, lease.replicas)

    def interference(self, session: str, *, since: float | None = None) -> dict[str, Any]:
        """`interference_record`'s JSON view, as a finish reports it."""
        return self.interference_record(session, since=since).view()
