"""The replica pool of `serve --workers N`: the leases live in the front, whatever worker or node
captures a session's traffic (docs/architecture.md, Replicas).

Before the front forwards `POST /sessions` it leases the task's replicas (waiting up to `wait`), resets
them when asked, and tells the worker the lease (`LEASE_HEADER`). The workers see the traffic: each
records the mutations through it, and the front gathers them (`GET /mutations`) before a finish or a
preview, whose forwarded request carries the session's interference (`INTERFERENCE_HEADER`), and every
few seconds, so a changed replica is known as changed when its lease ends. A finish, a lost worker or
`--lease-timeout` (idle time: the workers tell when each session last used its lease; a session whose
worker did not answer keeps its lease) or `POST /sessions/{s}/abandon` ends a lease; the session's
worker is told (`PUT /sessions/{s}/lease_ended`, retried) so its proxy forwards nothing more for it;
changed replicas are reset from here, in the background.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import httpx

from webarena_live.addresses.headers import INTERFERENCE_HEADER, LEASE_HEADER
from webarena_live.control.errors import as_control_error
from webarena_live.control.leasing import encode_interference, listed
from webarena_live.control.models import StartSession
from webarena_live.evaluator import TaskSet, UnknownTaskError, site_key
from webarena_live.fleet.workers import Worker
from webarena_live.replicas import Mutation, PoolError
from webarena_live.replicas.pool import ReplicaPool

logger = logging.getLogger("webarena_live.fleet")

GATHER_SECONDS = 2.0
"""How often the front gathers the workers' mutations between finishes."""
ASK_TIMEOUT = 5.0
"""Seconds a worker may take to tell its mutations; one that does not answer is told as such."""
TELL_TRIES = 5
"""Times the front tells a worker a lease ended before it gives up (the worker is gone: its session
is lost anyway); `TELL_PAUSE` seconds apart."""
TELL_PAUSE = 1.0


class FrontLeases:
    """The front's pool and what it does around the session routes."""

    def __init__(self, pool: ReplicaPool, tasks: TaskSet) -> None:
        self.pool = pool
        self.tasks = tasks
        self.cursors: dict[int, tuple[str | None, int]] = {}
        """Per worker: its mutation log's epoch and the last mutation gathered from it."""
        self.reads: dict[int, dict[str, dict[str, int]]] = {}
        """Per worker: the requests its log judged reads, by site and rule (its latest answer; `/health`)."""
        self.unanswered: set[int] = set()
        """Workers that did not tell their mutations at the last gathering."""
        self.used_since: dict[int, float] = {}
        """Per worker: its clock at its last answer; it tells only the lease uses since (`active_after`)."""
        self.answered: set[int] = set()
        """Workers that told them (and when each of their sessions was last used) at the last gathering."""
        self.telling: set[asyncio.Future[bool]] = set()
        """The lease ends being told to workers now (kept: a task nobody holds may be collected)."""

    # --- the start -------------------------------------------------------------------------------

    async def before_start(
        self, name: str, start: StartSession, document: dict[str, Any]
    ) -> tuple[dict[str, str], dict[str, Any]]:
        """Lease the task's replicas for `name` (resetting them first when the body asks): the headers
        and the body to forward (`document`, the body `start` was read from). Raises `ControlError`
        (the pool's 503, a failed reset's 502) with nothing held."""
        try:
            task = self.tasks[start.task_id]
        except UnknownTaskError:
            return {}, document  # the worker answers the 404
        try:
            lease = await self.pool.lease(name, task, wait=start.wait)
            if start.reset:
                await self.pool.reset_leased(name, start.reset_timeout)  # a failure gives the lease back
                document = {**document, "reset": False}  # done here, on the session's own replicas
        except PoolError as error:
            raise as_control_error(error) from None
        return {LEASE_HEADER: json.dumps(lease.indexes)}, document

    def release(self, name: str, reason: str) -> None:
        self.pool.release(name, reason)

    # --- the finish ------------------------------------------------------------------------------

    async def interference_header(
        self, http: httpx.AsyncClient, workers: list[Worker], name: str, auth: dict[str, str]
    ) -> dict[str, str]:
        """Gather every worker's mutations; then the header that carries session `name`'s interference
        on the finish (or preview) the front forwards to its worker."""
        await self.gather(http, workers, auth)
        interference = listed(self.pool.interference(name))
        if self.unanswered:
            interference["unanswered_workers"] = sorted(self.unanswered)
        return {INTERFERENCE_HEADER: encode_interference(interference)}

    async def gather(self, http: httpx.AsyncClient, workers: list[Worker], auth: dict[str, str]) -> None:
        """Every up worker's mutations since the last gathering, into the front's pool."""
        answers = await asyncio.gather(*(self._ask(http, worker, auth) for worker in workers))
        self.unanswered = {
            worker.index for worker, answer in zip(workers, answers, strict=True) if answer is None
        }
        self.answered = {worker.index for worker in workers} - self.unanswered
        for worker, answer in zip(workers, answers, strict=True):
            if answer is None:
                continue
            epoch, mutations, active, reads = answer
            self.reads[worker.index] = reads
            # Two gatherings may be in flight at once (a finish's and the watch's), asking from the same
            # cursor: a mutation is taken once, by whichever answer comes back first.
            known_epoch, seen = self.cursors.get(worker.index, (epoch, 0))
            seen = seen if known_epoch == epoch else 0
            mutations = [m for m in mutations if m["seq"] > seen]
            for mutation in mutations:
                self._take(mutation)
            for session, touched in active.items():  # used through the worker: not idle
                lease = self.pool.leases.get(session)
                if lease is not None and isinstance(touched, int | float):
                    lease.touch(float(touched))
            self.cursors[worker.index] = (epoch, mutations[-1]["seq"] if mutations else seen)

    def _take(self, told: dict[str, Any]) -> None:
        """One mutation a worker's log told (`MutationLog.mutations_after`), judged there, into the pool."""
        site, index = site_key(str(told["site"])), int(told["index"])
        if site not in self.pool.replicas or not 0 <= index < len(self.pool.replicas[site]):
            return  # a worker on another site map: nothing of ours changed
        mutation = Mutation(str(told["session"]), str(told["method"]), str(told["url"]), float(told["time"]))
        self.pool.take(site, index, mutation)

    async def _ask(
        self, http: httpx.AsyncClient, worker: Worker, auth: dict[str, str]
    ) -> tuple[str | None, list[dict[str, Any]], dict[str, Any], dict[str, dict[str, int]]] | None:
        epoch, after = self.cursors.get(worker.index, (None, 0))
        params: dict[str, Any] = {"after": after}
        if worker.index in self.used_since:  # the uses since its last answer, not every session's
            params["active_after"] = self.used_since[worker.index]
        try:
            reply = await http.get(
                f"{worker.control_url}/mutations", params=params, headers=auth, timeout=ASK_TIMEOUT
            )
            document = reply.json()
        except (httpx.HTTPError, ValueError):
            return None
        if reply.status_code != 200:
            return None
        told = document.get("epoch")
        told = told if isinstance(told, str) else None
        if told != epoch and after:  # a restarted worker counts from the start again
            self.cursors[worker.index] = (told, 0)
            self.used_since.pop(worker.index, None)  # a new process: every use it tells
            return await self._ask(http, worker, auth)
        active, reads = document.get("active"), document.get("reads")
        if isinstance(now := document.get("now"), int | float):
            self.used_since[worker.index] = float(now)
        return (
            told,
            list(document.get("mutations", [])),
            active if isinstance(active, dict) else {},
            reads if isinstance(reads, dict) else {},
        )

    async def watch(
        self,
        http: httpx.AsyncClient,
        workers: Callable[[], list[Worker]],
        auth: dict[str, str],
        owner_of: Callable[[str], Worker | None],
    ) -> None:
        """Gather the workers' mutations (and when each session last used its lease) every few seconds,
        and end the leases idle past `--lease-timeout`, telling each one's worker. A session whose
        worker did not answer (or was not asked: restarting, silent) keeps its lease: its idle time is
        not known."""
        while True:
            await asyncio.sleep(GATHER_SECONDS)
            try:
                await self.gather(http, list(workers()), auth)
                for name in self.expire(owner_of):
                    logger.warning(
                        "webarena-live: session %s was idle past --lease-timeout (%g s): its replicas are "
                        "given back; its requests are refused until it finishes",
                        name, self.pool.lease_timeout,
                    )  # fmt: skip
                    if (owner := owner_of(name)) is not None:
                        told = asyncio.ensure_future(self.tell_ended(http, owner, name, "timeout", auth))
                        self.telling.add(told)  # in the background: the next gathering does not wait
                        told.add_done_callback(self.telling.discard)
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

    async def tell_ended(
        self, http: httpx.AsyncClient, owner: Worker, name: str, ended: str, auth: dict[str, str]
    ) -> bool:
        """Tell the session's worker its lease ended here, so its proxy forwards nothing more for it;
        tried `TELL_TRIES` times. Whether the worker heard it."""
        url = f"{owner.control_url}/sessions/{quote(name, safe='')}/lease_ended"
        for tried in range(1, TELL_TRIES + 1):
            try:
                reply = await http.put(url, json={"ended": ended}, headers=auth, timeout=ASK_TIMEOUT)
                if reply.status_code < 500:  # heard (a 404: the session is gone there; nothing to end)
                    return True
            except httpx.HTTPError:
                pass
            if tried < TELL_TRIES:
                await asyncio.sleep(TELL_PAUSE)
        logger.error("webarena-live: worker %d was not told that session %s's lease ended", owner.index, name)
        return False
