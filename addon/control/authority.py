"""Who decides this process's leases: one `Authority` behind one seam (docs/architecture.md, Leases).

The control API, the proxy's hooks and the finish ask the context's one `Authority` for a session's
lease, its end and its interference, and never ask which topology they run in. Two implementations:

- `PoolAuthority`: this process holds the replica pool (`replicas/pool.py`) and its word is final: the
  single process, whatever its site map (an empty map leases nothing), and a fleet's front
  (`fleet/front/leases.py` adds the gathering from the workers around it).
- `ToldLeases`: a fleet's worker, which holds no pool: each lease is the view its front told it on the
  start (`control/wire.py`: `lease_view`), its end what the front told it later, its interference what
  the front carries on the finish. A context built with no pool at all (a test's app) is one that was
  told nothing.

`authority_for` picks one from the options, once per configuration. Refusals of the pool become JSON
errors here (`as_control_error`).
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, Any

from webarena_live.control.bodies import ControlError
from webarena_live.control.errors import as_control_error
from webarena_live.control.wire import lease_view, read_interference
from webarena_live.evaluator import SiteMap, Task
from webarena_live.replicas import EndReason, Interference, Isolation, Lease, MutationLog, PoolError
from webarena_live.replicas.build import banner_line, build_pool
from webarena_live.replicas.pool import ReplicaPool
from webarena_live.replicas.reset import ResetOutcome, reset_sites, sites_without_reset
from webarena_live.runs.sessions import NoticeKind
from webarena_live.sites import CopyKeeper, SitesPlan

if TYPE_CHECKING:
    from webarena_live.control.context import ControlContext
    from webarena_live.runs.sessions import Session

logger = logging.getLogger("webarena_live.replicas")

INTERFERENCE_LISTED = 100
"""Mutations an interference lists (the first ones); `count` says how many there were."""
WATCH_SECONDS = 1.0
"""How often idle leases (`--lease-timeout`) are looked for."""


class Authority(ABC):
    """The leases of this process's sessions: granted, ended and judged for interference."""

    def __init__(self) -> None:
        self.context: ControlContext | None = None
        """The control context this authority serves (`attach`): its sessions hear of the ends."""

    @property
    @abstractmethod
    def log(self) -> MutationLog | None:
        """The mutations of the traffic this process sees (`GET /mutations`; the proxy records there)."""

    def attach(self, context: ControlContext) -> None:
        """Serve `context`: a lease's end and the pool's notices reach its sessions (a reconfigured
        proxy's new context takes the place of the last one)."""
        self.context = context

    @abstractmethod
    async def lease(
        self, name: str, task: Task, *, wait: float, resume: bool, told: str | None
    ) -> Lease | None:
        """The replicas session `name` works on (`told`: a front's `LEASE_HEADER`); a resumed session's
        own lease, as it was (an ended one stays ended). Raises the pool's 503 when no replica fits
        within `wait` seconds; None when there is nothing to lease."""

    @abstractmethod
    async def reset_leased(self, name: str, timeout: float) -> list[ResetOutcome] | None:
        """`"reset": true`: reset the session's own replicas (a failure gives the lease back); None when
        this process resets none of its own (the task's sites are then reset: `reset_first`)."""

    @abstractmethod
    def end(self, name: str, reason: EndReason, detail: str | None = None) -> None:
        """End session `name`'s lease (its finish, a refused start): nothing where another decides."""

    @abstractmethod
    def end_early(self, lease: Lease, reason: EndReason, detail: str | None) -> None:
        """End a held `lease` before its finish (an abandon, or the end a front told)."""

    @abstractmethod
    def interference(self, session: Session, given: str | None = None) -> Interference:
        """What a finish or a preview reports of others' mutations on the session's replicas (`given`:
        the front's word, `INTERFERENCE_HEADER`, which never overrides a pool's)."""

    @abstractmethod
    def start(self) -> None:
        """Once the event loop runs: the resets a restart found needed, before the first lease."""

    @abstractmethod
    async def close(self) -> None:
        """At shutdown: what the leases hold beyond the process (container copies) is let go."""

    @abstractmethod
    def expire_idle(self) -> None:
        """End the leases idle past `--lease-timeout` now (the proxy asks every `WATCH_SECONDS`)."""

    @abstractmethod
    def health(self) -> dict[str, Any]:
        """What `/health` adds: the pool's state where it is held."""

    @abstractmethod
    def banner(self, *, confine: bool) -> str | None:
        """The line `serve`'s banner prints of the leases, if any."""

    def _told_end(self, lease: Lease, reason: EndReason, detail: str | None) -> None:
        """A lease this process does not end through a pool takes the end, and its session hears it."""
        lease.copy_end(reason, detail)
        if self.context is not None:
            self.context.ends.lease_ended(lease)


class PoolAuthority(Authority):
    """This process holds the pool: it grants, ends and judges (`ReplicaPool.end_lease` is the one
    way a lease ends: on disk first, then the replicas back)."""

    def __init__(self, pool: ReplicaPool) -> None:
        super().__init__()
        self.pool = pool

    @property
    def log(self) -> MutationLog:
        return self.pool.log

    def attach(self, context: ControlContext) -> None:
        super().attach(context)
        self.pool.on_end = context.ends.lease_ended
        sessions = context.sessions

        def notice(name: str, notice: dict[str, Any]) -> None:  # the pool to the session's bus, direct
            found = sessions.get(name)
            if found is not None:
                sessions.notices.publish(found, NoticeKind.POOL, notice)

        self.pool.on_change = notice

    async def lease(
        self, name: str, task: Task, *, wait: float, resume: bool, told: str | None = None
    ) -> Lease:
        try:  # a client's lease header is no word here: the pool's is
            return await self.pool.lease(name, task, wait=wait, resume=resume)
        except PoolError as error:
            raise as_control_error(error) from None

    async def reset_leased(self, name: str, timeout: float) -> list[ResetOutcome] | None:
        if name not in self.pool.leases:
            return None
        try:
            return await self.pool.reset_leased(name, timeout)  # a failure gives the lease back
        except PoolError as error:
            raise as_control_error(error) from None

    def end(self, name: str, reason: EndReason, detail: str | None = None) -> None:
        self.pool.end_lease(name, reason, detail)

    def end_early(self, lease: Lease, reason: EndReason, detail: str | None) -> None:
        if self.pool.leases.get(lease.session) is lease:
            self.pool.end_lease(lease.session, reason, detail)  # tells `lease_ended` (the context)
        else:  # a lease the pool does not hold (a session without replicas): its end is its own
            self._told_end(lease, reason, detail)

    def interference(self, session: Session, given: str | None = None) -> Interference:
        return self.listed_interference(session.name, since=session.attempt.started)

    def listed_interference(self, name: str, since: float | None = None) -> Interference:
        """Session `name`'s interference (since `since`, else its lease's start), at most
        `INTERFERENCE_LISTED` mutations listed and all of them counted."""
        return self.pool.interference_record(name, since=since).listed(INTERFERENCE_LISTED)

    def lease_of(self, name: str) -> Lease | None:
        """Session `name`'s lease as the pool keeps it, held or ended."""
        return self.pool.leases.get(name) or self.pool.ended.get(name)

    def start(self) -> None:
        self.pool.start()

    async def close(self) -> None:
        if self.pool.keeper is not None:
            await self.pool.close()  # its container copies removed, unless kept

    def expire_idle(self) -> None:
        self.pool.expire()  # nothing without a timeout; each end logged and announced (`SessionEnds`)

    def health(self) -> dict[str, Any]:
        return {"pool": self.pool.status()}

    def banner(self, *, confine: bool) -> str | None:
        return banner_line(self.pool, confine=confine) if self.pool.site_map.environments else None


class ToldLeases(Authority):
    """A fleet's worker: its front leases. Each attempt holds the view of the lease the front told it
    (`lease_view`); this authority keeps only the mutation log of the traffic here (which the front
    gathers)."""

    def __init__(self, log: MutationLog | None = None) -> None:
        super().__init__()
        self._log = log

    @property
    def log(self) -> MutationLog | None:
        return self._log

    async def lease(
        self, name: str, task: Task, *, wait: float, resume: bool, told: str | None
    ) -> Lease | None:
        if told is None or self.context is None:
            return None
        return lease_view(told, self.context.site_map, name)

    async def reset_leased(self, name: str, timeout: float) -> list[ResetOutcome] | None:
        return None  # the front resets the session's replicas before it forwards the start

    def end(self, name: str, reason: EndReason, detail: str | None = None) -> None:
        """The front ends it, and tells this worker (`PUT /sessions/{s}/lease_ended`)."""

    def end_early(self, lease: Lease, reason: EndReason, detail: str | None) -> None:
        self._told_end(lease, reason, detail)

    def interference(self, session: Session, given: str | None = None) -> Interference:
        return read_interference(given) if given is not None else Interference.none()

    def start(self) -> None:
        return None  # the front's pool makes its resets

    async def close(self) -> None:
        return None  # the front's pool holds the copies

    def expire_idle(self) -> None:
        return None  # the front ends idle leases, and tells this worker

    def health(self) -> dict[str, Any]:
        return {}  # the front's `/health` tells its pool

    def banner(self, *, confine: bool) -> str | None:
        return None


def authority_for(
    site_map: SiteMap,
    *,
    front: bool,
    isolation: Isolation | None,
    lease_timeout: float | None,
    current: Authority | None,
    state_file: Path,
    reset_at_start: bool = False,
    copies: SitesPlan | None = None,
) -> Authority:
    """The authority of a configuration: told by its front (`front`), else the pool of `site_map` under
    `isolation` (`build_pool`, the same checks as a fleet's front's). What `current` holds is kept when
    it still fits: the same pool (its leases live on), or a worker's log of the same map (its front's
    reading position holds); a kept log takes the new map's reads and changes rules from
    `MutationLog.judge_by`, which the caller calls once every option holds. Never a pool's log for a
    worker: a pool built before the worker learnt its front would go on taking the worker's mutations."""
    if front:
        log = current.log if isinstance(current, ToldLeases) else None
        if log is None or log.site_map != site_map:
            return ToldLeases(MutationLog(site_map))
        return ToldLeases(log)  # the caller has it judge by the new map once the options all hold
    pool = current.pool if isinstance(current, PoolAuthority) else None
    kept = pool is not None and pool.site_map == site_map and pool.keeper is not None
    keeper = pool.keeper if kept and pool is not None else CopyKeeper(copies) if copies else None
    built = build_pool(
        site_map, isolation, lease_timeout, state_file=state_file,
        reset_at_start=reset_at_start, current=pool, keeper=keeper,
    )  # fmt: skip
    return PoolAuthority(built)


async def reset_first(ctx: ControlContext, sites: tuple[str, ...], timeout: float) -> list[ResetOutcome]:
    """Reset the task's sites before the session starts; refuses (nothing started) unless all succeed."""
    missing = sites_without_reset(ctx.site_map, sites)
    if missing:
        detail = (
            f"no reset_url in the site map for {', '.join(missing)}; add one per site, or start without reset"
        )
        raise ControlError(409, "reset_unavailable", detail)
    outcomes = await reset_sites(ctx.site_map, sites, timeout=timeout)
    if not all(outcome.ok for outcome in outcomes):
        raise ControlError(502, "reset_failed", [outcome.view() for outcome in outcomes])
    return outcomes


def abandon(
    ctx: ControlContext, session: Session, reason: str | None, ended: EndReason = EndReason.ABANDONED
) -> Lease:
    """End `session`'s lease before its finish (`ended`: `abandoned`, or what a front says: `timeout`,
    `lost`), through the context's authority. From now on the proxy forwards nothing more for the session
    (`proxy/lease_checks.py`: `hold`); a finish still judges what was captured, with `lease_ended`. A
    lease that ended already stays as it ended."""
    attempt = session.attempt
    lease = attempt.lease
    if lease is None:  # no replicas (no site map): the session still ends its lease
        lease = attempt.lease = Lease({}, {}, session=session.name, started=attempt.started)
    if lease.ended is None:
        ctx.authority.end_early(lease, ended, reason)
    return lease
