"""Replica pools: which copy of each site a session works on, who may share it, and when it is reset.

A site of the site map may have several replicas, each a complete deployment with its own URLs and
reset endpoint (`evaluator/sites.py`). `POST /sessions` leases one replica per site of the task to the
session; the lease ends with its finish, when it is abandoned (`--lease-timeout`) or when its worker or
node is lost. Who may share a replica is the sharing policy (`--isolation`):

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
from collections.abc import Callable, Collection, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx

from webarena_live.evaluator import SiteMap, Task, placeholder, site_key, write_json_atomically
from webarena_live.replicas import memory
from webarena_live.replicas.errors import NoReplica, ResetFailed
from webarena_live.replicas.lease import Lease
from webarena_live.replicas.mutations import MutationLog, add_reads
from webarena_live.replicas.policy import Isolation, default_isolation, is_mutating
from webarena_live.replicas.reset import RESET_TIMEOUT, ResetOutcome, reset_endpoint
from webarena_live.replicas.state import Mutation, ReplicaState, SiteCounters, no_interference
from webarena_live.replicas.views import counters_view, pool_status

logger = logging.getLogger("webarena_live.replicas")

REFUSED_KEPT = 20
RETRY_PAUSE = (2.0, 60.0)
"""Seconds before a failed reset is tried again, doubling from the first to the second."""


class ReplicaPool:
    """Every site's replicas, their leases, and the mutations seen on them (docs/architecture.md,
    Replicas). All of it runs on one event loop: no locks."""

    def __init__(
        self,
        site_map: SiteMap,
        sharing: Isolation | None = None,
        *,
        lease_timeout: float | None = None,
        reset_timeout: float = RESET_TIMEOUT,
        on_change: Callable[[str, dict[str, Any]], None] | None = None,
    ) -> None:
        self.site_map = site_map
        self.sharing = sharing if sharing is not None else default_isolation(site_map)
        """The sharing policy (`--isolation`): who may hold a replica with whom."""
        self.lease_timeout = lease_timeout
        self.reset_timeout = reset_timeout
        self.on_change = on_change
        """Told `(session, notice)` when a lease starts or ends and when a replica's state changes."""
        self.state_file: Path | None = None
        """Where the replicas' state and the reset counters are kept (`OUT/.pool.json`: `memory.py`),
        for a restart and the run report, when set."""
        self.replicas: dict[str, list[ReplicaState]] = {
            name: [ReplicaState(name, i, r.url, r.reset_url) for i, r in enumerate(env.replicas)]
            for name, env in site_map.environments.items()
        }
        self.counters = {name: SiteCounters() for name in self.replicas}
        self.leases: dict[str, Lease] = {}
        self.waiting = 0
        self.refused: deque[dict[str, Any]] = deque(maxlen=REFUSED_KEPT)
        """The starts refused for want of a replica, newest last (`/health`, the dashboard)."""
        self._changed = asyncio.Condition()
        self._tasks: set[asyncio.Task[None]] = set()
        self._seq = 0
        self.log = MutationLog(site_map)
        """The mutations of the traffic this process sees, handed to the pool as they are recorded; a
        fleet's front hands it its workers' instead (`take`)."""
        self.log.listen(self.take)
        self._pending: list[tuple[ReplicaState, str]] = []
        """Resets to run once the event loop does (`start`): replicas a restart found changed."""

    def restore(self, *, reset_all: bool = False) -> list[ReplicaState]:
        """Read what the state file remembers: every replica it names changed, resetting or out of
        service (with `reset_all`: every replica) is reset before its first lease (`start` runs the
        resets). The replicas to reset."""
        if self.state_file is None:
            return []
        chosen = memory.restore(self.state_file, self.replicas, self.counters, reset_all=reset_all)
        why = "--reset-at-start" if reset_all else "changed before a restart"
        self._pending += [(replica, why) for replica in chosen if replica.resetting]
        self._keep()
        return chosen

    def start(self) -> None:
        """Run the resets `restore` found needed; called once the event loop runs (again: nothing)."""
        pending, self._pending = self._pending, []
        for replica, why in pending:
            self._spawn(self._reset(replica, "", why=why))

    # --- leases ------------------------------------------------------------------------------------

    async def lease(
        self, session: str, task: Task, *, wait: float = 0.0, keep: dict[str, int] | None = None
    ) -> Lease:
        """One replica per site of `task` for `session` (its current lease is given up first). `keep`:
        the lease a resumed session held, taken back as it was. With no fitting replica, waits up to
        `wait` seconds, then raises `NoReplica`."""
        self.release(session, "restarted")
        sites = tuple(site_key(s) for s in task.sites if site_key(s) in self.replicas)
        mutating = is_mutating(task)
        if keep is not None:
            return self._grant(session, task, mutating, {s: i for s, i in keep.items() if s in self.replicas})
        deadline = time.monotonic() + wait
        while True:
            chosen = self._choose(sites, mutating)
            if chosen is not None:
                return self._grant(session, task, mutating, chosen)
            left = deadline - time.monotonic()
            if left <= 0:
                detail = self._busy_detail(sites, mutating)
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

    def _choose(self, sites: tuple[str, ...], mutating: bool) -> dict[str, int] | None:
        chosen = {}
        for site in sites:
            fitting = [r for r in self.replicas[site] if self._fits(r, mutating)]
            if not fitting:
                return None
            chosen[site] = self._best(fitting, mutating).index
        return chosen

    def _best(self, fitting: list[ReplicaState], mutating: bool) -> ReplicaState:
        """The least busy of `fitting`; under `readers`, a read-only task joins a replica other readers
        hold before it takes a free one: readers pack, and the free copies stay free for mutating tasks."""
        least_busy = min(fitting, key=lambda r: (len(r.holders), r.dirty, r.index))
        if self.sharing is not Isolation.READERS or mutating:
            return least_busy
        shared = [r for r in fitting if r.holders]
        if shared:
            return min(shared, key=lambda r: (len(r.holders), r.index))
        return least_busy

    def _fits(self, replica: ReplicaState, mutating: bool) -> bool:
        if self.sharing is Isolation.NONE:
            return replica.leasable  # a replica reset after a restart waits for it, whatever the policy
        if not replica.leasable or replica.dirty:  # a changed replica is reset before its next lease
            return False
        if self.sharing is Isolation.EXCLUSIVE or mutating:
            return not replica.holders
        return not any(replica.holders.values())  # readers share what no mutating session holds

    def _grant(self, session: str, task: Task, mutating: bool, chosen: dict[str, int]) -> Lease:
        lease = Lease(chosen, self._urls(chosen), session=session, task_id=task.task_id, mutating=mutating)
        self.leases[session] = lease
        for replica in self._leased(lease):
            replica.holders[session] = mutating
        self._tell(session, "lease", {"replicas": dict(lease.replicas), "isolation": str(self.sharing)})
        return lease

    def release(self, session: str, reason: str = "finished") -> Lease | None:
        """End `session`'s lease (finished, abandoned, lost, restarted); its changed replicas are reset
        in the background once nobody holds them."""
        lease = self.leases.pop(session, None)
        if lease is None:
            return None
        lease.end(reason)
        for replica in self._leased(lease):
            replica.holders.pop(session, None)
            if replica.holders:
                continue
            if replica.dirty and self.sharing is not Isolation.NONE and not replica.resetting:
                replica.resetting = True  # from now on: no lease until the reset is done
                self._spawn(self._reset(replica, session))
            elif not replica.dirty:
                self.counters[replica.site].skipped += 1
                self._keep()
        self._tell(session, "release", {"reason": reason})
        self._wake()
        return lease

    def abandon(self, session: str, detail: str | None = None) -> Lease | None:
        """`POST /sessions/{s}/abandon`: the session gives its replicas back now (`ended`: `abandoned`)."""
        lease = self.leases.get(session)
        if lease is not None:
            lease.end("abandoned", detail)
        return self.release(session, "abandoned")

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
            self.release(session, "timeout")
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
            self._tell(mutation.session, "replica", {"site": placeholder(site), **replica.view()})
        if not replica.holders and self.sharing is not Isolation.NONE and not replica.resetting:
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

    # --- resets ---------------------------------------------------------------------------------------

    async def reset_leased(self, session: str, timeout: float) -> list[ResetOutcome]:
        """`POST /sessions {"reset": true}`: reset the session's replicas now, before it starts. When one
        fails the lease is given back and `ResetFailed` raised."""
        lease = self.leases.get(session)
        if lease is None:
            return []
        replicas = [r for r in self._leased(lease) if r.reset_url]
        async with httpx.AsyncClient(trust_env=False) as client:
            outcomes = await asyncio.gather(*(self._reset_once(client, r, timeout) for r in replicas))
        if not all(outcome.ok for outcome in outcomes):
            self.release(session, "reset failed")
            raise ResetFailed([outcome.view() for outcome in outcomes])
        return list(outcomes)

    async def _reset(self, replica: ReplicaState, after: str, *, why: str | None = None) -> None:
        """Reset a changed replica nobody holds, retrying with a growing pause until it succeeds.
        `after`: the session whose leaving called for it ("" when `why` says: a restart)."""
        self._keep()
        self._tell(after, "replica", {"site": placeholder(replica.site), **replica.view()})
        pause = RETRY_PAUSE[0]
        try:
            async with httpx.AsyncClient(trust_env=False) as client:
                while True:
                    outcome = await self._reset_once(client, replica, self.reset_timeout)
                    replica.resets.append(
                        {"at": time.time(), "after": after or None, "why": why, "seconds": outcome.seconds,
                         "ok": outcome.ok, "detail": outcome.detail}
                    )  # fmt: skip
                    if outcome.ok:
                        logger.info(
                            "replica %d of %s (%s) reset in %.1f s, %s",
                            replica.index, placeholder(replica.site), replica.url, outcome.seconds,
                            f"after session {after}" if after else why,
                        )  # fmt: skip
                        return
                    replica.out_of_service = outcome.detail
                    logger.warning(
                        "replica %d of %s (%s) is out of service: its reset failed: %s",
                        replica.index, placeholder(replica.site), replica.url, outcome.detail,
                    )  # fmt: skip
                    self._tell(after, "replica", {"site": placeholder(replica.site), **replica.view()})
                    await asyncio.sleep(pause)
                    pause = min(pause * 2, RETRY_PAUSE[1])
        finally:
            replica.resetting = False
            self._keep()
            self._tell(after, "replica", {"site": placeholder(replica.site), **replica.view()})
            self._wake()

    async def _reset_once(
        self, client: httpx.AsyncClient, replica: ReplicaState, timeout: float
    ) -> ResetOutcome:
        assert replica.reset_url is not None
        seq = self._seq
        outcome = await reset_endpoint(client, replica.site, replica.reset_url, timeout)
        counters = self.counters[replica.site]
        counters.seconds += outcome.seconds
        if outcome.ok:
            counters.resets += 1
            replica.out_of_service = None
            # clean unless a mutation arrived while the reset ran (it may have landed after it)
            replica.dirty = any(m.seq > seq for m in replica.mutations)
        else:
            counters.failed += 1
        self._keep()
        return outcome

    # --- views ----------------------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """The pool as `/health` shows it (`views.pool_status`)."""
        policy, leases, refused = str(self.sharing), len(self.leases), list(self.refused)
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
        document = memory.document_of(str(self.sharing), self.counters_view(), self.replicas)
        try:
            write_json_atomically(self.state_file, document)
        except OSError as error:
            logger.warning("cannot keep the pool's state in %s: %s", self.state_file, error)

    def _busy_detail(self, sites: tuple[str, ...], mutating: bool) -> str:
        kind = "a mutating task" if mutating else "a read-only task"
        busy = [
            f"{placeholder(site)}: " + ", ".join(r.in_words() for r in self.replicas[site]) for site in sites
        ]
        return f"no replica is free for {kind} under --isolation {self.sharing} ({'; '.join(busy)})"

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
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
