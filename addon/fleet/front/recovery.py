"""What the front does when a worker dies, comes back or leaves: a restarted worker's running sessions
started again from their journals at their ports, and a session that cannot go on reported `lost`, never
dropped (docs/architecture.md, Workers and Ray). The worker pools call it (`workers.WorkerEvents`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import httpx

from webarena_live.addresses.headers import PROXY_PORT_HEADER
from webarena_live.addresses.placement import Placement
from webarena_live.fleet.front.leases import FrontLeases
from webarena_live.fleet.front.link import RETRY_AFTER_SECONDS, WorkerLink, error_of
from webarena_live.fleet.front.registry import SessionRegistry
from webarena_live.fleet.workers.local import Worker, Workers

logger = logging.getLogger("webarena_live.fleet")

RESUME_DEADLINE = 20.0
RESUME_TRIES = 3
"""Tries to resume a session on its restarted worker (a try cut short by the worker's death counts)
before it is reported `lost` with the reason."""


class Recovery:
    """The workers' deaths, returns and losses, as the sessions on them live through them."""

    def __init__(
        self,
        workers: Workers,
        placement: Placement,
        registry: SessionRegistry,
        link: WorkerLink,
        leases: FrontLeases,
        *,
        lose: Callable[[str, str], None],
    ) -> None:
        self.workers, self.placement, self.registry, self.link = workers, placement, registry, link
        self.leases = leases
        self.session_lost = lose
        """Report a session `lost` with the reason (`SessionLife.lost`: the one place that does)."""
        self.resume_failures: dict[str, int] = {}
        """Failed (or cut short) tries to resume each session, reset when one succeeds."""

    def worker_down(self, index: int) -> None:
        self.placement.down.add(index)

    def worker_lost(self, index: int, reason: str) -> None:
        """The worker's node is gone: its running sessions cannot resume. Each is reported `lost`
        (`GET /sessions`, the log, a `lost` notice), and its name may be started again elsewhere."""
        for name in self.placement.running_on(index):
            self.session_lost(name, reason)

    async def resume_on(self, index: int) -> None:
        """A restarted worker: start each of its running sessions again from its journal, at its port.
        A session whose resume is refused, or fails `RESUME_TRIES` times (tries cut short by the
        worker's death count too), is reported `lost` with the reason: none waits for ever."""
        worker = self.workers[index]
        starts = self.registry.starts
        for name in self.placement.running_on(index):
            start = starts.get(name)
            port = self.placement.port_of(name)
            if start is None or port is None:
                continue
            while name in starts:
                if self.resume_failures.get(name, 0) >= RESUME_TRIES:
                    self.session_lost(name, f"no resume on worker {index} succeeded in {RESUME_TRIES} tries")
                    break
                self.resume_failures[name] = self.resume_failures.get(name, 0) + 1  # kept if cut short
                problem, final = await self._resume(worker, name, start, port)
                if problem is None:
                    self.resume_failures.pop(name, None)
                    break
                logger.error("webarena-live: session %s could not be resumed on worker %d: %s",
                             name, index, problem)  # fmt: skip
                if final:
                    self.session_lost(name, f"worker {index} refused to resume it: {problem}")
                    break
                await asyncio.sleep(RETRY_AFTER_SECONDS)
        self.placement.down.discard(index)

    async def _resume(
        self, worker: Worker, name: str, start: dict[str, Any], port: int
    ) -> tuple[str | None, bool]:
        """One try: (what went wrong or None, whether trying again is pointless)."""
        body = {**start, "session": name, "resume_journal": True}
        try:
            reply = await self._start_on(worker, body, port)
            if reply.status_code == 404 and error_of(reply.content) == "no_journal":
                body.pop("resume_journal")  # no event was journaled yet: nothing to resume
                reply = await self._start_on(worker, body, port)
        except httpx.HTTPError as error:
            return f"{type(error).__name__}: {error}", False
        if reply.status_code == 200:
            resumed = reply.json().get("resumed_events", 0)
            logger.warning("webarena-live: session %s resumed on worker %d with %d events",
                           name, worker.index, resumed)  # fmt: skip
            return None, False
        if reply.status_code == 409 and error_of(reply.content) == "session_running":
            # A new `serve` knows only the sessions resumed on it: a try the front counted as failed
            # (the worker died as it answered, or the request waited in the kept socket's backlog for
            # its successor) or the round before a second death resumed it already.
            logger.warning("webarena-live: session %s runs on worker %d already", name, worker.index)
            return None, False
        return f"{reply.status_code} {reply.text.strip()}", reply.status_code < 500

    async def _start_on(self, worker: Worker, body: dict[str, Any], port: int) -> httpx.Response:
        """Start the session on its restarted worker with its lease as the front keeps it (an ended one
        ended: its address then forwards nothing)."""
        told = self.leases.told(str(body["session"]))
        headers = {PROXY_PORT_HEADER: str(port), **told}
        return await self.link.start_on(worker, body, headers, RESUME_DEADLINE)
