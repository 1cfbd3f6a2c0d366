"""The pool's resets and repairs (`replicas/pool.py`): a changed replica reset by its way (its endpoint,
a new container: `replicas/reset.py`, `ResetWay`) once nobody holds it, a copy made or adopted at start
(`start`), a copy whose container died (`copy_lost`), a failing one (its recent judged answers mostly
failures: `answered`) kept from new
leases, reset and probed once nobody holds it, each retried with a growing pause until it succeeds (out
of service meanwhile), and the resets a session asks for before it starts (`"reset": true`). A part of
`ReplicaPool`, kept apart for its size.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import httpx

from webarena_live.evaluator import placeholder
from webarena_live.replicas.errors import ResetFailed
from webarena_live.replicas.health import probe_pause
from webarena_live.replicas.policy import Isolation
from webarena_live.replicas.reset import probe_endpoint
from webarena_live.replicas.state import ReplicaState, SiteCounters
from webarena_live.replicas.ways import ResetOutcome, ResetWay

if TYPE_CHECKING:
    from webarena_live.replicas.lease import Lease

logger = logging.getLogger("webarena_live.replicas")


class CopyKeeper(Protocol):
    """Who keeps the replicas that are containers (`webarena_live.sites.CopyKeeper`): it watches their
    containers and removes them when the pool closes. The pool knows no engine."""

    @property
    def ways(self) -> Mapping[tuple[str, int], ResetWay]:
        """How each copy, by (site, index), is made new."""
        ...

    @property
    def ceilings(self) -> Mapping[str, int]:
        """Per site, how many copies may be held at once (the rest are spares)."""
        ...

    def describe(self) -> str:
        """What the banner says of the copies: `3 container copies on 1 engine, 1 spare`."""
        ...

    def problems(self) -> list[str]:
        """What stops the copies before anything starts (an engine that does not answer), a line each."""
        ...

    async def watch(self, lost: Callable[[str, int, str], None]) -> None:
        """Tell `lost(site, index, why)` of each copy whose container stopped, died or vanished."""
        ...

    async def close(self) -> None: ...


class PoolResets:
    """The resets of `ReplicaPool`, which provides what they read and tell."""

    leases: dict[str, Lease]
    replicas: dict[str, list[ReplicaState]]
    isolation: Isolation
    counters: dict[str, SiteCounters]
    reset_timeout: float
    _seq: int

    def _leased(self, lease: Lease) -> Iterator[ReplicaState]:
        raise NotImplementedError

    def end_lease(self, session: str, reason: str, detail: str | None = None) -> Lease | None:
        raise NotImplementedError

    def _keep(self) -> None:
        raise NotImplementedError

    def _tell(self, session: str, kind: str, data: dict[str, Any]) -> None:
        raise NotImplementedError

    def _wake(self) -> None:
        raise NotImplementedError

    def _spawn(self, coroutine: Any) -> None:
        raise NotImplementedError

    def answered(self, site: str, index: int, failed: bool) -> None:
        """A judged answer replica `index` of `site` gave (from this process's log, or gathered from a
        worker's; never a fault made on purpose). When its recent answers turn mostly failures it is
        `failing`: its holders are told, it takes no new lease, and once nobody holds it, it is reset
        and probed (`_reset`). Under `--isolation none` it is only watched and shown, never kept from
        leases, and stops failing once its answers do."""
        replica = self.replicas[site][index]
        failing = replica.health.record_outcome(failed=failed)
        if self.isolation is Isolation.NONE and replica.failing and not failing:
            replica.failing = None
            self._keep()
            return
        if not failing or replica.failing is not None:
            return
        health = replica.health.view()
        replica.failing = (
            f"{health['recent_failures']} of its last {health['recent_answers']} judged answers failed"
        )
        logger.warning(
            "replica %d of %s (%s) is failing: %s%s", replica.index, placeholder(site), replica.url,
            replica.failing, "" if self.isolation is Isolation.NONE else "; no lease until it answers",
        )  # fmt: skip
        self._keep()
        for holder in sorted(replica.holders) or [""]:  # each holder's event stream says so
            self._tell(holder, "replica", {"site": placeholder(site), **replica.view()})
        if not replica.holders and self.isolation is not Isolation.NONE and not replica.resetting:
            replica.resetting = True
            self._spawn(self._reset(replica, "", why=f"failing: {replica.failing}"))

    async def reset_leased(self, session: str, timeout: float) -> list[ResetOutcome]:
        """`POST /sessions {"reset": true}`: reset the session's replicas now, before it starts. When one
        fails the lease is given back and `ResetFailed` raised."""
        lease = self.leases.get(session)
        if lease is None:
            return []
        replicas = [r for r in self._leased(lease) if r.way is not None]
        found = await asyncio.gather(*(self._reset_once(r, timeout) for r in replicas))
        outcomes = [outcome for outcome in found if outcome is not None]
        if not all(outcome.ok for outcome in outcomes):
            self.end_lease(session, "reset failed")
            raise ResetFailed([outcome.view() for outcome in outcomes])
        return list(outcomes)

    def copy_lost(self, site: str, index: int, why: str) -> None:
        """A copy whose container stopped, died or vanished (told by its keeper from the engine's own
        state, not from failed answers): failing at once (its holders told, no new lease) and made new
        once nobody holds it, whatever the sharing policy (a dead copy serves no one)."""
        replica = self.replicas[site][index]
        if replica.resetting:
            return  # being made new already: its container is the reset's to replace
        replica.failing = why
        logger.warning(
            "replica %d of %s (%s) is failing: %s; no lease until it is made new",
            replica.index, placeholder(site), replica.url, why,
        )  # fmt: skip
        self._keep()
        for holder in sorted(replica.holders) or [""]:
            self._tell(holder, "replica", {"site": placeholder(site), **replica.view()})
        if not replica.holders or self.isolation is Isolation.NONE:
            replica.resetting = True
            self._spawn(self._reset(replica, "", why=f"failing: {why}"))

    async def _reset(
        self, replica: ReplicaState, after: str, *, why: str | None = None, start: bool = False
    ) -> None:
        """Bring back a replica nobody holds: reset it through its endpoint when it has one (a changed
        one), then, when it is failing or has a `health_url` of its own, probe it; retried with a growing
        pause (out of service meanwhile) until both succeed. `after`: the session whose leaving called
        for it ("" when `why` says: a restart, a failing copy)."""
        replica.reset_started = time.time()
        self._keep()
        self._tell(after, "replica", {"site": placeholder(replica.site), **replica.view()})
        attempt = 0
        try:
            async with httpx.AsyncClient(trust_env=False) as client:
                while True:
                    problem, seconds = None, None
                    if replica.way is not None:
                        outcome = await self._reset_once(replica, self.reset_timeout, start=start)
                        if outcome is None:  # nothing to bring up: in service as it is
                            self._back(replica, after, why, None)
                            return
                        start = start and not outcome.ok  # a failed bring-up is retried as a reset
                        replica.resets.append(
                            {"at": time.time(), "after": after or None, "why": why,
                             "seconds": outcome.seconds, "ok": outcome.ok, "detail": outcome.detail}
                        )  # fmt: skip
                        if outcome.ok and replica.dirty and not replica.holders:
                            continue  # changed while the reset ran (told late): no one else resets it
                        problem, seconds = (None if outcome.ok else outcome.detail), outcome.seconds
                    if problem is None and (replica.failing or replica.checked) and replica.probe_url:
                        problem = await probe_endpoint(client, replica.probe_url, strict=replica.checked)
                    if problem is None:
                        self._back(replica, after, why, seconds)
                        return
                    replica.out_of_service = problem
                    logger.warning(
                        "replica %d of %s (%s) is out of service: %s",
                        replica.index, placeholder(replica.site), replica.url, problem,
                    )  # fmt: skip
                    self._keep()
                    self._tell(after, "replica", {"site": placeholder(replica.site), **replica.view()})
                    await asyncio.sleep(probe_pause(attempt))  # a failed reset or probe: 2 s, doubling
                    attempt += 1
        finally:
            replica.resetting = False
            replica.reset_started = None
            self._keep()
            self._tell(after, "replica", {"site": placeholder(replica.site), **replica.view()})
            self._wake()

    def _back(self, replica: ReplicaState, after: str, why: str | None, seconds: float | None) -> None:
        """A replica reset in `seconds` (and probed when it had to be; None: probed only): in service
        again, its failing forgotten."""
        replica.out_of_service = None
        was_failing, replica.failing = replica.failing, None
        replica.health.clear()
        done = f"reset in {seconds:.1f} s" if seconds is not None else "probed"
        logger.info(
            "replica %d of %s (%s) %s, %s%s",
            replica.index, placeholder(replica.site), replica.url, done,
            f"after session {after}" if after else why,
            f"; it was failing ({was_failing}) and answers again" if was_failing else "",
        )  # fmt: skip

    async def _reset_once(
        self, replica: ReplicaState, timeout: float, *, start: bool = False
    ) -> ResetOutcome | None:
        """One reset of `replica` by its way (with `start`: its bring-up, None when it has none)."""
        assert replica.way is not None
        seq = self._seq
        outcome = await (replica.way.bring_up() if start else replica.way.reset(timeout))
        if outcome is None:
            return None
        counters = self.counters[replica.site]
        if outcome.ok:  # out of service until its probe, if any, says it is up (`_back`)
            # clean unless a mutation arrived while the reset ran (it may have landed after it)
            replica.dirty = any(m.seq > seq for m in replica.mutations)
        if start:  # a copy made or adopted at start is no reset of the counters
            self._keep()
            return outcome
        counters.seconds += outcome.seconds
        if outcome.ok:
            counters.resets += 1
        else:
            counters.failed += 1
        self._keep()
        return outcome
