"""Replica pools: which copy of each site a session works on, who may share it, and when it is reset.

A site of the site map may have several replicas, each a complete deployment with its own URLs and
reset endpoint (`evaluator/sites.py`). `POST /sessions` leases one replica per site of the task to the
session; the lease ends (`end_lease`, the one way it ends, written to the lease book first) with its
finish, when it is abandoned (`POST /sessions/{s}/abandon`, or idle past `--lease-timeout`) or when its
worker or node is lost, and an ended lease is never granted again, not even to a session resumed after
a restart. Who may share a replica is the sharing policy (`--isolation`):

- `exclusive`: a replica serves one session at a time;
- `readers`: sessions whose task only reads (retrieve, navigate) share a replica no mutating session
  holds; a mutating task holds its replica alone;
- `none`: everyone on any replica, the least busy first, as on a single copy.

Every mutation through the proxy (POST, PUT, PATCH, DELETE: `MutationLog.record`, `replicas/mutations.py`)
marks its replica changed. Under
`readers` and `exclusive` a changed replica is reset through its endpoint once its last holder leaves,
in the background, before anyone leases it again; one that saw only reads goes back at once; a reset
that fails or times out takes its replica out of service (reported, retried with a growing pause, never
leased dirty). Under `none` nothing is reset unasked, as before. Whatever the policy, a session's
`interference` names the mutations other sessions made on its replicas while it held them: the verdict
stays the reference's, and whoever reads it knows whether someone else's change could have decided it.
See docs/architecture.md, Replicas.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from webarena_live.evaluator import SiteMap, Task, placeholder, site_key, write_json_atomically
from webarena_live.replicas import memory
from webarena_live.replicas.errors import NoReplica
from webarena_live.replicas.health import ReplicaHealth
from webarena_live.replicas.lease import FORGOTTEN, Lease
from webarena_live.replicas.lease_book import LeaseBook
from webarena_live.replicas.mutations import MutationLog, add_reads
from webarena_live.replicas.policy import Isolation, default_isolation, is_mutating
from webarena_live.replicas.reset import RESET_TIMEOUT, EndpointReset
from webarena_live.replicas.resetting import CopyKeeper, PoolResets
from webarena_live.replicas.state import Mutation, ReplicaState, SiteCounters, no_interference
from webarena_live.replicas.views import busy_detail, counters_view, pool_status
from webarena_live.replicas.ways import ResetWay

logger = logging.getLogger("webarena_live.replicas")

REFUSED_KEPT = 20


class ReplicaPool(PoolResets):
    """Every site's replicas, their leases, and the mutations seen on them (docs/architecture.md,
    Replicas). All of it runs on one event loop: no locks."""

    def __init__(
        self,
        site_map: SiteMap,
        isolation: Isolation | None = None,
        *,
        lease_timeout: float | None = None,
        reset_timeout: float = RESET_TIMEOUT,
        on_change: Callable[[str, dict[str, Any]], None] | None = None,
        ways: Mapping[tuple[str, int], ResetWay] | None = None,
        ceilings: Mapping[str, int] | None = None,
        keeper: CopyKeeper | None = None,
    ) -> None:
        self.site_map = site_map
        self.isolation = isolation if isolation is not None else default_isolation(site_map)
        """The sharing policy (`--isolation`): who may hold a replica with whom."""
        self.lease_timeout = lease_timeout
        self.reset_timeout = reset_timeout
        self.on_change = on_change
        """Told `(session, notice)` when a lease starts or ends and when a replica's state changes."""
        self.state_file: Path | None = None
        """Where the replicas' state and the reset counters are kept (`OUT/.pool.json`: `memory.py`),
        for a restart and the run report, when set."""
        ways = ways or {}
        self.replicas: dict[str, list[ReplicaState]] = {
            name: [
                ReplicaState(
                    name,
                    i,
                    r.url,
                    r.reset_url,
                    probe_url=r.probe_url,
                    checked=r.health_url is not None,
                    way=ways.get((name, i)) or (EndpointReset(name, r.reset_url) if r.reset_url else None),
                    health=ReplicaHealth(env.health),
                )
                for i, r in enumerate(env.replicas)
            ]
            for name, env in site_map.environments.items()
        }
        self.ceilings = dict(ceilings or {})
        """Per site, how many of its replicas may be held at once (the others are spares kept fresh);
        a site not named: all of them."""
        self.keeper = keeper
        """The container copies' keeper (`webarena_live.sites`), when the map names images: watched for
        copies that die (`start`), told to remove them at `close`."""
        self.counters = {name: SiteCounters() for name in self.replicas}
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
        self.on_end: Callable[[Lease], None] | None = None
        """Told each lease that ended, once it is on disk: the control API says so (`control/leasing.py`),
        a fleet's front tells the session's worker (`fleet/front/leases.py`)."""
        self.waiting = 0
        self.refused: deque[dict[str, Any]] = deque(maxlen=REFUSED_KEPT)
        """The starts refused for want of a replica, newest last (`/health`, the dashboard)."""
        self._changed = asyncio.Condition()
        self._tasks: set[asyncio.Task[None]] = set()
        self._seq = 0
        self.log = MutationLog(site_map)
        """The mutations of the traffic this process sees, handed to the pool as they are recorded; a
        fleet's front hands it its workers' instead (`take`)."""
        self.log.listen(self.take, self.answered)
        self._started = False
        self._pending: list[tuple[ReplicaState, str]] = []
        """Resets to run once the event loop does (`start`): replicas a restart found changed."""

    def restore(self, *, reset_all: bool = False) -> list[ReplicaState]:
        """Read what the state file remembers: every replica it names changed, resetting or out of
        service (with `reset_all`: every replica) is reset before its first lease (`start` runs the
        resets). The replicas to reset."""
        if self.state_file is None:
            return []
        chosen = memory.restore(self.state_file, self.replicas, self.counters, reset_all=reset_all)
        for session, lease in self.book.all().items():
            if lease.ended is not None:
                self.ended[session] = lease
            elif all(s in self.replicas and 0 <= i < len(self.replicas[s]) for s, i in lease.indexes.items()):
                self.suspended[session] = lease
        why = "--reset-at-start" if reset_all else "changed before a restart"
        self._pending += [(replica, why) for replica in chosen if replica.resetting or replica.failing]
        self._keep()
        return chosen

    def start(self) -> None:
        """Run the resets `restore` found needed, bring up the replicas that must be made or adopted
        first (container copies: out of service until ready), and watch the copies' containers; called
        once the event loop runs (again: nothing)."""
        pending, self._pending = self._pending, []
        chosen = {id(replica) for replica, _ in pending}
        for replica, why in pending:
            replica.resetting = True
            self._spawn(self._reset(replica, "", why=f"failing before a restart ({replica.failing})"
                                    if replica.failing else why))  # fmt: skip
        if self._started:
            return
        self._started = True
        for replica in (r for rs in self.replicas.values() for r in rs):
            if replica.way is not None and replica.way.kind == "recreate" and id(replica) not in chosen:
                replica.resetting = True
                self._spawn(self._reset(replica, "", why="starting", start=True))
        if self.keeper is not None:
            self._spawn(self.keeper.watch(self.copy_lost))

    # --- leases ------------------------------------------------------------------------------------

    async def lease(self, session: str, task: Task, *, wait: float = 0.0, resume: bool = False) -> Lease:
        """One replica per site of `task` for `session`. A new start gives the session's current lease
        up first (`restarted`); a resumed session (`resume`) gets its own lease back as it was: an ended
        one ended (it holds nothing, and its address forwards nothing), a held one on the same replicas
        when they fit the policy now (another session may have taken them since a restart), else on
        fitting ones. With no fitting replica, waits up to `wait` seconds, then raises `NoReplica`."""
        sites = tuple(site_key(s) for s in task.sites if site_key(s) in self.replicas)
        mutating = is_mutating(task)
        if resume and (ended := self.ended.get(session)) is not None:
            return ended
        if resume and (held := self.leases.get(session)) is not None:
            return held
        kept = self.suspended.get(session) if resume else None
        if not resume:  # a new attempt: its earlier lease, held or remembered, is over
            self.end_lease(session, "restarted")
        deadline = time.monotonic() + wait
        while True:
            chosen = self._choose(sites, mutating, kept.indexes if kept is not None else None)
            if chosen is not None:
                return self._grant(session, task, mutating, chosen)
            left = deadline - time.monotonic()
            if left <= 0:
                detail = busy_detail(self.replicas, self.isolation, sites, mutating, self.ceilings)
                self.refused.append({"at": time.time(), "session": session, "task_id": task.task_id,
                                     "detail": detail})  # fmt: skip
                raise NoReplica(detail)
            self.waiting += 1
            try:
                async with self._changed:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._changed.wait(), left)
            finally:
                self.waiting -= 1

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

    def _grant(self, session: str, task: Task, mutating: bool, chosen: dict[str, int]) -> Lease:
        lease = Lease(chosen, self._urls(chosen), session=session, task_id=task.task_id, mutating=mutating)
        self.book.write(lease)  # on disk before anyone sees it
        self.suspended.pop(session, None)
        self.leases[session] = lease
        for replica in self._leased(lease):
            replica.holders[session] = mutating
        self._tell(session, "lease", {"replicas": dict(lease.replicas), "isolation": str(self.isolation)})
        return lease

    def _forget(self, session: str) -> None:
        """A new start (or the finish) of `session`: its earlier attempt's lease is no longer resumable."""
        if self.ended.pop(session, None) is not None or self.suspended.pop(session, None) is not None:
            self.book.drop(session)

    def end_lease(self, session: str, reason: str, detail: str | None = None) -> Lease | None:
        """End `session`'s lease: the one way a lease ends, whatever caused it (its finish, an abandon,
        the idle timeout, a lost worker or node, a refused start). The end is written to the lease book
        first; then the replicas go back (a changed one is reset in the background once nobody holds
        it) and `on_end` is told. A finished session's lease is forgotten; any other end is
        remembered, so a resume gets it back ended. The lease ended (None when it held none)."""
        if reason in FORGOTTEN:
            self._forget(session)
        elif (suspended := self.suspended.pop(session, None)) is not None:  # never resumed: ends as it is
            suspended._close(reason, detail)
            self.book.write(suspended)
            self.ended[session] = suspended
            return suspended
        lease = self.leases.pop(session, None)
        if lease is None:
            return None
        lease._close(reason, detail)
        unused = reason == "refused"  # its start did not go on: nobody used it, it leaves nothing on disk
        if reason in FORGOTTEN:
            self.book.drop(session, granted_last=unused)
        else:
            self.book.write(lease)
            self.ended[session] = lease
        for replica in self._leased(lease):
            replica.holders.pop(session, None)
            if replica.holders:
                continue
            if replica.failing and self.isolation is not Isolation.NONE and not replica.resetting:
                replica.resetting = True  # a failing copy its holders left: reset (when it can be), probed
                self._spawn(self._reset(replica, session, why=f"failing: {replica.failing}"))
            elif replica.dirty and self.isolation is not Isolation.NONE and not replica.resetting:
                replica.resetting = True  # from now on: no lease until the reset is done
                self._spawn(self._reset(replica, session))
            elif not replica.dirty and not unused:  # a clean copy given back unused skipped no reset
                self.counters[replica.site].skipped += 1
                self._keep()
        self._tell(session, "release", {"reason": reason})
        if self.on_end is not None:
            try:
                self.on_end(lease)
            except Exception:  # a watcher never breaks the pool
                logger.exception("a lease-end watcher failed")
        self._wake()
        return lease

    def expire(self, now: float | None = None, *, keep: Collection[str] = ()) -> list[str]:
        """End the leases idle past `--lease-timeout` (no request through the session, no control call:
        `Lease.touched`), as `timeout`, but those of the sessions in `keep` (a fleet's front keeps those
        whose worker did not say when they were last used); the sessions whose lease ended."""
        if self.lease_timeout is None:
            return []
        now = time.time() if now is None else now
        expired = [
            s
            for s, lease in self.leases.items()
            if now - lease.touched > self.lease_timeout and s not in keep
        ]
        for session in expired:
            self.end_lease(session, "timeout")
        return expired

    def _urls(self, indexes: dict[str, int]) -> dict[str, str]:
        return {placeholder(site): self.replicas[site][index].url for site, index in indexes.items()}

    def _leased(self, lease: Lease) -> Iterator[ReplicaState]:
        for site, index in lease.indexes.items():
            yield self.replicas[site][index]

    # --- mutations and interference ------------------------------------------------------------------

    def take(self, site: str, index: int, mutation: Mutation) -> None:
        """A mutation on replica `index` of `site` (from this process's log, or gathered from a worker's):
        it marks the replica changed and counts in the interference of whoever else holds it."""
        self._seq += 1  # the pool's own order: a worker's numbers are its own
        mutation = replace(mutation, seq=self._seq)
        replica = self.replicas[site][index]
        replica.mutations.append(mutation)
        if not replica.dirty:
            replica.dirty = True
            self._keep()  # on disk before anything else: a killed serve must not lease it unreset
            if replica.way is not None:
                replica.way.changed()
            self._tell(mutation.session, "replica", {"site": placeholder(site), **replica.view()})
        if not replica.holders and self.isolation is not Isolation.NONE and not replica.resetting:
            # changed after its lease ended (a late request, a worker's told late): no release resets it
            replica.resetting = True
            self._spawn(self._reset(replica, mutation.session, why="changed after its lease ended"))

    def interference(self, session: str, *, since: float | None = None) -> dict[str, Any]:
        """The mutations other sessions made on `session`'s replicas while it held them: `exposed`
        true when there is at least one."""
        lease = self.leases.get(session)
        if lease is None:
            return no_interference()
        start = lease.started if since is None else since
        others = sorted(
            (m for replica in self._leased(lease) for m in replica.mutations
             if m.session != session and m.time >= start),
            key=lambda m: m.time,
        )  # fmt: skip
        return {
            "exposed": bool(others),
            "mutations": [m.view() for m in others],
            "replicas": dict(lease.replicas),
        }

    # --- views ----------------------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """The pool as `/health` shows it (`views.pool_status`)."""
        policy, leases, refused = str(self.isolation), len(self.leases), list(self.refused)
        status = pool_status(self.replicas, self.counters, policy, self.waiting, leases, refused)
        return add_reads(status, self.log.reads_view())

    def counters_view(self) -> dict[str, Any]:
        """Per site: resets done, skipped (released clean), failed, and seconds spent resetting."""
        return counters_view(self.counters)

    def _keep(self) -> None:
        """The replicas' state and the counters on disk (`memory.py`), atomically; a write that fails
        is told and costs what a restart would remember."""
        if self.state_file is None:
            return
        document = memory.document_of(str(self.isolation), self.counters_view(), self.replicas)
        try:  # its folder made first: on a new machine the default state folder does not exist yet
            self.state_file.parent.mkdir(parents=True, exist_ok=True)
            write_json_atomically(self.state_file, document)
        except OSError as error:
            logger.warning("cannot keep the pool's state in %s: %s", self.state_file, error)

    def _tell(self, session: str, kind: str, data: dict[str, Any]) -> None:
        if self.on_change is not None:
            try:
                self.on_change(session, {"kind": kind, **data})
            except Exception:  # a watcher never breaks the pool
                logger.exception("a pool watcher failed")

    def _wake(self) -> None:
        async def notify() -> None:
            async with self._changed:
                self._changed.notify_all()

        self._spawn(notify())

    def _spawn(self, coroutine: Any) -> None:
        try:
            task = asyncio.get_running_loop().create_task(coroutine)
        except RuntimeError:  # no loop (a pure test): nothing waits, and a reset has nowhere to run
            coroutine.close()
            return
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        """Stop the resets and the watch; then the keeper removes its copies (unless told to keep them)."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.keeper is not None:
            await self.keeper.close()
