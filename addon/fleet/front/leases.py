"""The replica pool of `serve --workers N`: the front holds it, whatever worker or node captures a
session's traffic; a worker holds only the views the front told it. The lease's life is told once, in
docs/architecture.md (Leases); here is what only a front does around its `PoolAuthority`: gathering
the workers' mutations, answers and lease uses (`GET /mutations`, validated by its model) before a
finish, a preview or an abandon and every few seconds, carrying the session's interference on what it
forwards, and telling each end to the session's worker (`LeaseEnd`, retried). Every call to a worker
goes through `WorkerLink`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from webarena_live.addresses.headers import INTERFERENCE_HEADER, LEASE_HEADER
from webarena_live.control.authority import PoolAuthority
from webarena_live.control.bodies import ControlError
from webarena_live.control.models import MutationSeen, StartSession
from webarena_live.control.wire import LeaseEnd, Mutations, encode_interference, encode_lease
from webarena_live.evaluator import TaskSet, UnknownTaskError, site_key
from webarena_live.fleet.front.link import WorkerLink
from webarena_live.fleet.workers.local import Worker
from webarena_live.replicas import FORGOTTEN, EndReason, Lease, Mutation
from webarena_live.replicas.pool import ReplicaPool

logger = logging.getLogger("webarena_live.fleet")

GATHER_SECONDS = 2.0
"""How often the front gathers the workers' mutations between finishes."""


class FrontLeases:
    """The front's pool and what it does around the session routes: the front is a `PoolAuthority`
    (`control/authority.py`), with the workers' mutations gathered into it and each end told to the
    session's worker. Without a site map its pool is empty and leases nothing, as a single process's."""

    def __init__(self, pool: ReplicaPool, tasks: TaskSet | Callable[[], TaskSet]) -> None:
        self.pool = pool
        self.authority = PoolAuthority(pool)
        """The pool's word, as a single process's control API asks it."""
        self._tasks = tasks
        """The workers' tasks, or how to read them at the first start (without a site map the workers
        read and tell their own file's problems first)."""
        self.cursors: dict[int, tuple[str | None, int]] = {}
        """Per worker: its mutation log's epoch and the last mutation gathered from it."""
        self.answer_cursors: dict[int, int] = {}
        """Per worker: the last judged answer gathered from it (the copies' health), in the same epoch."""
        self.reads: dict[int, dict[str, dict[str, int]]] = {}
        """Per worker: the requests its log judged reads, by site and rule (its latest answer; `/health`)."""
        self.unanswered: set[int] = set()
        """Workers that did not tell their mutations at the last gathering."""
        self.used_since: dict[int, float] = {}
        """Per worker: its clock at its last answer; it tells only the lease uses since (`active_after`)."""
        self.answered: set[int] = set()
        """Workers that told them (and when each of their sessions was last used) at the last gathering."""
        self.telling: dict[str, asyncio.Future[bool]] = {}
        """The lease ends being told to workers now, by session (an abandon waits for its own)."""
        self.link: WorkerLink | None = None
        self.owner_of: Callable[[str], Worker | None] = lambda name: None
        pool.on_end = self._ended

    def tasks(self) -> TaskSet:
        """The workers' tasks (read once)."""
        if not isinstance(self._tasks, TaskSet):
            self._tasks = self._tasks()
        return self._tasks

    def attach(self, link: WorkerLink, owner_of: Callable[[str], Worker | None]) -> None:
        """The way to the workers, and where each session lives: a lease's end is told to its worker."""
        self.link, self.owner_of = link, owner_of

    def _ended(self, lease: Lease) -> None:
        """A lease ended (on disk already): its worker is told in the background, unless the session is
        over there anyway (finished, refused) or its worker is gone (lost)."""
        if lease.ended in FORGOTTEN or lease.ended == "lost" or self.link is None:
            return
        owner = self.owner_of(lease.session)
        if owner is None:
            return
        told = asyncio.ensure_future(self.link.tell_lease_end(owner, lease.session, LeaseEnd.of(lease)))
        self.telling[lease.session] = told
        told.add_done_callback(lambda _: self.telling.pop(lease.session, None))

    # --- the start -------------------------------------------------------------------------------

    async def before_start(
        self, name: str, start: StartSession, document: dict[str, Any]
    ) -> tuple[dict[str, str], dict[str, Any]]:
        """Lease the task's replicas for `name` (resetting them first when the body asks): the headers
        and the body to forward (`document`, the body `start` was read from). Raises `ControlError`
        (the pool's 503, a failed reset's 502, an unknown task's 404) with nothing held."""
        try:
            task = self.tasks()[start.task_id]
        except UnknownTaskError as error:  # the workers' tasks: their 404, before a port is taken
            raise ControlError(404, "unknown_task", str(error)) from None
        authority = self.authority
        lease = await authority.lease(name, task, wait=start.wait, resume=start.resume_journal)
        if start.reset and lease.ended is None and lease.indexes:  # a failure gives the lease back
            await authority.reset_leased(name, start.reset_timeout)
            document = {**document, "reset": False}  # done here, on the session's own replicas
        return self._told_header(lease), document

    def end(self, name: str, reason: EndReason, detail: str | None = None) -> None:
        """End session `name`'s lease (the pool's one way); its worker is told (`_ended`)."""
        self.authority.end(name, reason, detail)

    def told(self, name: str) -> dict[str, str]:
        """The header that tells a worker resuming session `name` its lease as the front keeps it."""
        lease = self.authority.lease_of(name)
        return self._told_header(lease) if lease is not None else {}

    def _told_header(self, lease: Lease) -> dict[str, str]:
        """The lease header for a worker; none when the pool holds no replica (no site map): the worker
        then holds no lease, checks no request against one and resets the task's sites itself (its 409
        when they have no reset endpoint), as a worker always did without a site map."""
        return {LEASE_HEADER: encode_lease(lease)} if self.pool.replicas else {}

    # --- the finish ------------------------------------------------------------------------------

    async def interference_header(self, link: WorkerLink, workers: list[Worker], name: str) -> dict[str, str]:
        """Gather every worker's mutations; then the header that carries session `name`'s interference
        on the finish (or preview) the front forwards to its worker; none when the pool holds no
        replica (no site map: nobody can interfere, and the worker's answer is that)."""
        if not self.pool.replicas:
            return {}
        await self.gather(link, workers)
        interference = self.authority.listed_interference(name)
        return {INTERFERENCE_HEADER: encode_interference(interference.unanswered(sorted(self.unanswered)))}

    async def gather(self, link: WorkerLink, workers: list[Worker]) -> None:
        """Every up worker's mutations since the last gathering, into the front's pool."""
        if not self.pool.replicas and self.pool.lease_timeout is None:
            return  # no replica to judge, no lease to time out: nothing the workers tell matters here
        answers = await asyncio.gather(*(self._ask(link, worker) for worker in workers))
        self.unanswered = {
            worker.index for worker, answer in zip(workers, answers, strict=True) if answer is None
        }
        self.answered = {worker.index for worker in workers} - self.unanswered
        for worker, answer in zip(workers, answers, strict=True):
            if answer is None:
                continue
            self.reads[worker.index] = answer.reads
            # Two gatherings may be in flight at once (a finish's and the watch's), asking from the same
            # cursor: a mutation is taken once, by whichever answer comes back first.
            known_epoch, seen = self.cursors.get(worker.index, (answer.epoch, 0))
            seen = seen if known_epoch == answer.epoch else 0
            mutations = [m for m in answer.mutations if m.seq > seen]
            for mutation in mutations:
                self._take(mutation)
            for session, touched in answer.active.items():  # used through the worker: not idle
                lease = self.pool.leases.get(session)
                if lease is not None:
                    lease.touch(touched)
            self.cursors[worker.index] = (answer.epoch, mutations[-1].seq if mutations else seen)
            heard = self.answer_cursors.get(worker.index, 0) if known_epoch == answer.epoch else 0
            for told in answer.answers:
                if told.seq > heard and (site := site_key(told.site)) in self.pool.replicas:
                    if 0 <= told.index < len(self.pool.replicas[site]):
                        self.pool.answered(site, told.index, told.failed)
                    heard = told.seq
            self.answer_cursors[worker.index] = heard

    def _take(self, told: MutationSeen) -> None:
        """One mutation a worker's log told (`MutationLog.mutations_after`), judged there, into the pool."""
        site, index = site_key(told.site), told.index
        if site not in self.pool.replicas or not 0 <= index < len(self.pool.replicas[site]):
            return  # a worker on another site map: nothing of ours changed
        self.pool.take(site, index, Mutation(told.session, told.method, told.url, told.time))

    async def _ask(self, link: WorkerLink, worker: Worker) -> Mutations | None:
        epoch, after = self.cursors.get(worker.index, (None, 0))
        params: dict[str, Any] = {"after": after, "answers_after": self.answer_cursors.get(worker.index, 0)}
        if worker.index in self.used_since:  # the uses since its last answer, not every session's
            params["active_after"] = self.used_since[worker.index]
        answer = await link.ask_mutations(worker, params)
        if answer is None:
            return None
        if answer.epoch != epoch and (after or params["answers_after"]):  # a restarted worker: from its start
            self.cursors[worker.index] = (answer.epoch, 0)
            self.answer_cursors[worker.index] = 0
            self.used_since.pop(worker.index, None)  # a new process: every use it tells
            return await self._ask(link, worker)
        if answer.now is not None:
            self.used_since[worker.index] = answer.now
        return answer

    async def watch(self, link: WorkerLink, workers: Callable[[], list[Worker]]) -> None:
        """Gather the workers' mutations (and when each session last used its lease) every few seconds,
        and end the leases idle past `--lease-timeout` (each one's worker is told: `_ended`). A session
        whose worker did not answer (or was not asked: restarting, silent) keeps its lease: its idle
        time is not known."""
        while True:
            await asyncio.sleep(GATHER_SECONDS)
            try:
                await self.gather(link, list(workers()))
                self.expire(self.owner_of)
            except Exception:  # the watch must outlive any one bad answer
                logger.exception("webarena-live: gathering the workers' mutations failed")

    def expire(self, owner_of: Callable[[str], Worker | None]) -> list[str]:
        """End the leases idle past `--lease-timeout`, but those of sessions whose worker did not tell
        when they were last used at the last gathering; the sessions whose lease ended."""
        unheard = {
            name for name in self.pool.leases
            if (owner := owner_of(name)) is not None and owner.index not in self.answered
        }  # fmt: skip
        return self.pool.expire(keep=unheard)
