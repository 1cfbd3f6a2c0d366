"""Each copy's care in the replica pool (`PoolCare`): its resets by its way (an endpoint, a new container:
`ResetWay`, `replicas/ways.py`), its health from the judged answers (`answered`), a copy whose container
died (`copy_lost`), the bring-up at start and the resets a start asks for (`reset_leased`). One function,
`settle`, decides for every trigger whether a replica must be made new or probed now. Who holds what is
`replicas/holding.py`; `ReplicaPool` (`replicas/pool.py`) joins the two. When a copy is reset:
docs/architecture.md, Replicas.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from enum import Enum
from typing import Any, Protocol

import httpx

from webarena_live.evaluator import placeholder
from webarena_live.replicas.errors import ResetFailed
from webarena_live.replicas.health import probe_pause
from webarena_live.replicas.holding import Holding
from webarena_live.replicas.lease import Lease
from webarena_live.replicas.policy import Isolation
from webarena_live.replicas.reset import probe_endpoint
from webarena_live.replicas.state import ReplicaState, SiteCounters
from webarena_live.replicas.ways import ResetOutcome, ResetWay

logger = logging.getLogger("webarena_live.replicas")


class Trigger(Enum):
    """What calls for a look at a replica (`PoolCare.settle`)."""

    START = "start"
    """The pool starts: a replica a restart found changed or failing, a copy brought up."""
    END = "end"
    """A lease on it ended."""
    TAKE = "take"
    """It took a change."""
    ANSWERED = "answered"
    """Its judged answers turned mostly failures."""
    LOST = "lost"
    """Its container stopped, died or vanished."""


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


class PoolCare:
    """The resets, repairs and bring-ups of a `Holding`'s replicas, run in the background on the one event
    loop. It tells the pool through `keep` (the state on disk), `tell` (a session's notice) and `wake` (a
    replica may fit now)."""

    def __init__(
        self,
        holding: Holding,
        counters: dict[str, SiteCounters],
        *,
        reset_timeout: float,
        keeper: CopyKeeper | None,
        keep: Callable[[], None],
        tell: Callable[[str, str, dict[str, Any]], None],
        wake: Callable[[], None],
    ) -> None:
        self.holding = holding
        self.counters = counters
        self.reset_timeout = reset_timeout
        self.keeper = keeper
        self._keep, self._tell, self._wake = keep, tell, wake
        self._tasks: set[asyncio.Task[None]] = set()
        self._started = False
        self._pending: list[tuple[ReplicaState, str]] = []
        """Resets to run once the event loop does (`start`): replicas a restart found changed."""

    def restored(self, replicas: list[ReplicaState], why: str) -> None:
        """The replicas a restart found changed (or failing): reset at `start`, before their first lease."""
        self._pending += [(replica, why) for replica in replicas if replica.resetting or replica.failing]

    def start(self) -> None:
        """Run the resets `restored` found needed, bring up the replicas that must be made or adopted
        first (container copies: out of service until ready), and watch the copies' containers; called
        once the event loop runs (again: only new restored resets)."""
        pending, self._pending = self._pending, []
        for replica, why in pending:
            self.settle(replica, Trigger.START, why=why)
        if self._started:
            return
        self._started = True
        chosen = {id(replica) for replica, _ in pending}
        for replica in (r for rs in self.holding.replicas.values() for r in rs if id(r) not in chosen):
            self.settle(replica, Trigger.START)
        if self.keeper is not None:
            self.spawn(self.keeper.watch(self.copy_lost))

    def settle(
        self,
        replica: ReplicaState,
        trigger: Trigger,
        *,
        after: str = "",
        why: str | None = None,
        unused: bool = False,
    ) -> None:
        """Whether `replica` is made new (or probed) now, whatever called for it (`after`: the session
        whose doing it was, "" when `why` says):

        - at START, whatever the policy: a replica a restart found changed or failing (`why` says so), and
          a copy that must be made or adopted before its first lease (a new container's way: `recreate`);
        - once nobody holds it, under `readers` and `exclusive`, when it changed or is failing and no reset
          runs: at a lease's END, a change that landed after (TAKE), answers that turned failures
          (ANSWERED); a clean one given back used (not `unused`: a refused start) counts as a reset skipped;
        - a LOST copy (its container died) once nobody holds it, whatever the policy, and at once under
          `none` (a dead copy serves no one). Under `none` nothing else is reset unasked."""
        if trigger is Trigger.START:
            if why is not None:  # a restart found it changed or failing
                failing = replica.failing
                self._begin(replica, after, f"failing before a restart ({failing})" if failing else why)
            elif replica.way is not None and replica.way.kind == "recreate":
                self._begin(replica, after, "starting", start=True)
            return
        policy, dead = self.holding.isolation, trigger is Trigger.LOST
        if replica.holders and not (dead and policy is Isolation.NONE):
            return  # its last holder's leaving settles it
        due = dead or (policy is not Isolation.NONE and bool(replica.failing or replica.dirty))
        if due and not replica.resetting:
            self._begin(replica, after, why or (f"failing: {replica.failing}" if replica.failing else None))
        elif trigger is Trigger.END and not replica.dirty and not unused:
            self.counters[replica.site].skipped += 1
            self._keep()

    def _begin(self, replica: ReplicaState, after: str, why: str | None, *, start: bool = False) -> None:
        replica.resetting = True  # from now on: no lease until the reset is done
        self.spawn(self._reset(replica, after, why=why, start=start))

    def changed(self, replica: ReplicaState, session: str, first: bool) -> None:
        """`session` changed `replica` (`ReplicaPool.take`); `first`: its first change since a reset,
        on disk before anything else (a killed serve must not lease it unreset) and told to its way.
        Changed after its lease ended (a late request, a worker's told late), no release resets it:
        `settle` does."""
        if first:
            self._keep()
            if replica.way is not None:
                replica.way.changed()
            self._tell(session, "replica", {"site": placeholder(replica.site), **replica.view()})
        self.settle(replica, Trigger.TAKE, after=session, why="changed after its lease ended")

    def answered(self, site: str, index: int, failed: bool) -> None:
        """A judged answer replica `index` of `site` gave (from this process's log, or gathered from a
        worker's; never a fault made on purpose). When its recent answers turn mostly failures it is
        `failing`: its holders are told, it takes no new lease, and once nobody holds it, it is reset
        and probed (`settle`). Under `--isolation none` it is only watched and shown, never kept from
        leases, and stops failing once its answers do."""
        replica = self.holding.replicas[site][index]
        failing = replica.health.record_outcome(failed=failed)
        none = self.holding.isolation is Isolation.NONE
        if none and replica.failing and not failing:
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
            replica.failing, "" if none else "; no lease until it answers",
        )  # fmt: skip
        self._keep()
        self._tell_holders(replica)
        self.settle(replica, Trigger.ANSWERED)

    def copy_lost(self, site: str, index: int, why: str) -> None:
        """A copy whose container stopped, died or vanished (told by its keeper from the engine's own
        state, not from failed answers): failing at once (its holders told, no new lease) and made new
        when `settle` says."""
        replica = self.holding.replicas[site][index]
        if replica.resetting:
            return  # being made new already: its container is the reset's to replace
        replica.failing = why
        logger.warning(
            "replica %d of %s (%s) is failing: %s; no lease until it is made new",
            replica.index, placeholder(site), replica.url, why,
        )  # fmt: skip
        self._keep()
        self._tell_holders(replica)
        self.settle(replica, Trigger.LOST)

    def _tell_holders(self, replica: ReplicaState) -> None:
        for holder in sorted(replica.holders) or [""]:  # each holder's event stream says so
            self._tell(holder, "replica", {"site": placeholder(replica.site), **replica.view()})

    async def reset_leased(self, lease: Lease, timeout: float) -> list[ResetOutcome]:
        """Reset `lease`'s replicas now, before its session starts (`"reset": true`); `ResetFailed` when
        one fails (the pool then ends the lease: `ReplicaPool.reset_leased`)."""
        replicas = [r for r in self.holding.leased(lease) if r.way is not None]
        found = await asyncio.gather(*(self._reset_once(r, timeout) for r in replicas))
        outcomes = [outcome for outcome in found if outcome is not None]
        if not all(outcome.ok for outcome in outcomes):
            raise ResetFailed([outcome.view() for outcome in outcomes])
        return outcomes

    async def _reset(
        self, replica: ReplicaState, after: str, *, why: str | None = None, start: bool = False
    ) -> None:
        """Bring back a replica nobody holds: reset it by its way when it has one (a changed one; with
        `start`: its bring-up), then, when it is failing or has a `health_url` of its own, probe it;
        retried with a growing pause (out of service meanwhile) until both succeed. `after`: the session
        whose leaving called for it ("" when `why` says: a restart, a failing copy)."""
        replica.reset_started = time.time()
        self._keep()
        self._tell(after, "replica", {"site": placeholder(replica.site), **replica.view()})
        attempt = 0
        try:
            while True:
                problem, seconds = None, None
                if replica.way is not None:
                    outcome = await self._reset_once(replica, self.reset_timeout, start=start)
                    if outcome is None:  # nothing to bring up: in service as it is
                        self._back(replica, after, why, None)
                        return
                    # a failed bring-up is tried again as one (a reset would refuse a copy that keeps
                    # changes); a copy brought up and changed meanwhile is reset next
                    start = start and not outcome.ok
                    replica.resets.append(
                        {"at": time.time(), "after": after or None, "why": why,
                         "seconds": outcome.seconds, "ok": outcome.ok, "detail": outcome.detail}
                    )  # fmt: skip
                    if outcome.ok and replica.dirty and not replica.holders:
                        continue  # changed while the reset ran (told late): no one else resets it
                    problem, seconds = (None if outcome.ok else outcome.detail), outcome.seconds
                if problem is None and (replica.failing or replica.checked) and replica.probe_url:
                    # a client only to probe: it loads a TLS context, which most resets need not pay for
                    async with httpx.AsyncClient(trust_env=False) as client:
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
        seq = self.holding.seq
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

    def spawn(self, coroutine: Any) -> None:
        """Run `coroutine` in the background on the running loop (none, in a pure test: it never runs)."""
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
