"""The replica pool (`ReplicaPool`): who holds what (`Holding`, `replicas/holding.py`) with each copy's care
(`PoolCare`, `replicas/resetting.py`), behind the one face the control API, the proxy and a fleet's front use;
here too the wait for a fitting replica, the pool's notices and its state on disk. How a lease lives and
when a copy is reset: docs/architecture.md, Replicas.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

from webarena_live.evaluator import SiteMap, Task, site_key, write_json_atomically
from webarena_live.replicas import memory
from webarena_live.replicas.errors import NoReplica, ResetFailed
from webarena_live.replicas.health import ReplicaHealth
from webarena_live.replicas.holding import Holding
from webarena_live.replicas.lease import EndReason, Lease
from webarena_live.replicas.mutations import MutationLog, add_reads
from webarena_live.replicas.policy import Isolation, default_isolation, is_mutating
from webarena_live.replicas.reset import RESET_TIMEOUT, EndpointReset
from webarena_live.replicas.resetting import CopyKeeper, PoolCare, Trigger
from webarena_live.replicas.state import Mutation, ReplicaState, SiteCounters
from webarena_live.replicas.status import busy_detail, counters_view, pool_status
from webarena_live.replicas.ways import ResetOutcome, ResetWay

logger = logging.getLogger("webarena_live.replicas")

REFUSED_KEPT = 20


class ReplicaPool(Holding):
    """Every site's replicas, their leases, and the mutations seen on them: a `Holding` whose every
    change that may call for a reset goes through its care's `settle` (`self.care`). All of it runs on
    one event loop: no locks."""

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
        ways = ways or {}
        replicas = {
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
        super().__init__(replicas, isolation or default_isolation(site_map), ceilings)
        self.site_map = site_map
        self.lease_timeout = lease_timeout
        self.on_change = on_change
        """Told `(session, notice)` when a lease starts or ends and when a replica's state changes."""
        self.state_file: Path | None = None
        """Where the replicas' state and the reset counters are kept (`OUT/.pool.json`: `memory.py`),
        for a restart and the run report, when set."""
        self.counters = {name: SiteCounters() for name in self.replicas}
        self.care = PoolCare(
            self, self.counters, reset_timeout=reset_timeout, keeper=keeper,
            keep=self._keep, tell=self._tell, wake=self._wake,
        )  # fmt: skip
        """The copies' resets, repairs and bring-ups (`resetting.py`)."""
        self.on_end: Callable[[Lease], None] | None = None
        """Told each lease that ended, once it is on disk: the control API says so (`control/authority.py`),
        a fleet's front tells the session's worker (`fleet/front/leases.py`)."""
        self.waiting = 0
        self.refused: deque[dict[str, Any]] = deque(maxlen=REFUSED_KEPT)
        """The starts refused for want of a replica, newest last (`/health`, the dashboard)."""
        self._changed = asyncio.Condition()
        self.log = MutationLog(site_map)
        """The mutations of the traffic this process sees, handed to the pool as they are recorded; a
        fleet's front hands it its workers' instead (`take`)."""
        self.log.listen(self.take, self.answered)

    @property
    def keeper(self) -> CopyKeeper | None:
        """The container copies' keeper (`webarena_live.sites`), when the map names images: watched for
        copies that die (`start`), told to remove them at `close`."""
        return self.care.keeper

    @property
    def reset_timeout(self) -> float:
        return self.care.reset_timeout

    def restore(self, *, reset_all: bool = False) -> list[ReplicaState]:
        """Read what the state file remembers: every replica it names changed, resetting or out of
        service (with `reset_all`: every replica) is reset before its first lease (`start` runs the
        resets). The replicas to reset."""
        if self.state_file is None:
            return []
        chosen = memory.restore(self.state_file, self.replicas, self.counters, reset_all=reset_all)
        self._restore_leases()
        self.care.restored(chosen, "--reset-at-start" if reset_all else "changed before a restart")
        self._keep()
        return chosen

    def start(self) -> None:
        """Run the resets `restore` found needed, bring up the replicas that must be made or adopted
        first (container copies: out of service until ready), and watch the copies' containers; called
        once the event loop runs (again: nothing)."""
        self.care.start()

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
            self.end_lease(session, EndReason.RESTARTED)
        deadline = time.monotonic() + wait
        while True:
            chosen = self._choose(sites, mutating, kept.indexes if kept is not None else None)
            if chosen is not None:
                lease = self._grant(session, task.task_id, mutating, chosen)
                self._tell(
                    session, "lease", {"replicas": dict(lease.replicas), "isolation": str(self.isolation)}
                )
                return lease
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

    def end_lease(self, session: str, reason: EndReason, detail: str | None = None) -> Lease | None:
        """End `session`'s lease: the one way a lease ends, whatever caused it (its finish, an abandon,
        the idle timeout, a lost worker or node, a refused start). The end is written to the lease book
        first; then the replicas go back (each one settled: `PoolCare.settle`) and `on_end` is told. A
        finished session's lease is forgotten; any other end is remembered, so a resume gets it back
        ended. The lease ended (None when it held none)."""
        reason = EndReason(reason)  # the member itself, even from a caller that passed its word
        lease, held = self._release(session, reason, detail)
        if lease is None or not held:
            return lease
        for replica in self.leased(lease):
            self.care.settle(replica, Trigger.END, after=session, unused=reason == EndReason.REFUSED)
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
        expired = self._idle(time.time() if now is None else now, self.lease_timeout, keep)
        for session in expired:
            self.end_lease(session, EndReason.TIMEOUT)
        return expired

    # --- what the traffic tells ----------------------------------------------------------------------

    def take(self, site: str, index: int, mutation: Mutation) -> None:
        """A mutation on replica `index` of `site` (from this process's log, or gathered from a worker's):
        it marks the replica changed and counts in the interference of whoever else holds it."""
        replica, first = self._mark(site, index, mutation)
        self.care.changed(replica, mutation.session, first)

    def answered(self, site: str, index: int, failed: bool) -> None:
        """A judged answer of replica `index` of `site` (`PoolCare.answered`: a failing copy's repair)."""
        self.care.answered(site, index, failed)

    def copy_lost(self, site: str, index: int, why: str) -> None:
        """A copy whose container stopped, died or vanished (`PoolCare.copy_lost`)."""
        self.care.copy_lost(site, index, why)

    async def reset_leased(self, session: str, timeout: float) -> list[ResetOutcome]:
        """`POST /sessions {"reset": true}`: reset the session's replicas now, before it starts. When one
        fails the lease is given back and `ResetFailed` raised."""
        lease = self.leases.get(session)
        if lease is None:
            return []
        try:
            return await self.care.reset_leased(lease, timeout)
        except ResetFailed:
            self.end_lease(session, EndReason.RESET_FAILED)
            raise

    # --- views ----------------------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """The pool as `/health` shows it (`status.pool_status`)."""
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

        self.care.spawn(notify())

    async def close(self) -> None:
        """Stop the resets and the watch; then the keeper removes its copies (unless told to keep them)."""
        await self.care.close()
