"""What the front knows of each session, whatever worker holds it: how it was started (to resume it), the
ones lost, the last view of the ones finished (listed after their worker restarted), where a finished
session's files were carried, and the merged `/events` streams its own notices go to
(docs/architecture.md, Workers and Ray).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from webarena_live.evaluator import ATTEMPT_FILES, WebArenaLiveError, locate_attempt
from webarena_live.fleet.front.carry import CarriedOutputs
from webarena_live.fleet.front.link import WorkerLink
from webarena_live.fleet.workers.local import Worker

logger = logging.getLogger("webarena_live.fleet")

CARRY_ATTEMPTS = 5
"""Times a finished session's files are looked up again when a later finish moved them meanwhile."""


class SessionRegistry:
    """The sessions as the front knows them. `outputs` is set when the workers write on other machines
    (their files are carried here), `report` answers `GET /report` of the carried outputs then."""

    def __init__(
        self,
        outputs: CarriedOutputs | None = None,
        report: Callable[[str | None], Awaitable[dict[str, Any]]] | None = None,
    ) -> None:
        self.outputs = outputs
        self.report = report
        self.starts: dict[str, dict[str, Any]] = {}
        """What each running session was started with (`task_id`, `run`), to resume it on a new worker."""
        self.lost: dict[str, dict[str, Any]] = {}
        """The sessions that cannot go on (their node left, or no resume succeeded), as listed."""
        self.finished: dict[str, dict[str, Any]] = {}
        """The view of each session finished through the front, as its worker last gave it: listed
        after that worker restarted (a new worker knows only the sessions it resumed)."""
        self.carried: dict[str, tuple[Path, str]] = {}
        """Each session's carried files on this machine, by session name: the task folder they were
        written to and the attempt's id (`locate_attempt` finds them after a later attempt moved them)."""
        self.event_streams: set[asyncio.Queue[bytes | None]] = set()
        """The merged `/events` streams open now: the front's own notices (`lost`) go to each."""

    def started(self, name: str, task_id: int, run: str | None) -> None:
        """Session `name` started: an earlier run's records of that name are not this run's."""
        self.starts[name] = {"task_id": task_id, "run": run}
        for record in (self.lost, self.finished, self.carried):
            record.pop(name, None)

    def announce(self, kind: str, data: dict[str, Any]) -> None:
        """A notice of the front's own, to every merged `/events` stream open now."""
        message = f"event: {kind}\ndata: {json.dumps(data)}\n\n".encode()
        for queue in self.event_streams:
            queue.put_nowait(message)

    async def remember_finished(
        self, link: WorkerLink, worker: Worker, name: str, view: dict[str, Any] | None = None
    ) -> None:
        """Keep the view of a session its worker just finished, to list it after that worker restarts
        (`view`: the one read since the finish, when the files' carrying read it)."""
        reply = view if view is not None else await link.session_view(worker, name)
        if reply is not None:
            self.finished[name] = {**reply, "worker": worker.index, "node": worker.node}

    async def carry_outputs(self, link: WorkerLink, worker: Worker, name: str) -> dict[str, Any] | None:
        """The files of a session the worker just finished, written into this machine's output dir
        (`self.outputs`); their paths here are what the session's view shows from then on. When they
        cannot be carried the verdict stands, and the view says where the files stayed. The session's
        view as last read (None when none was), so the finish reads it once."""
        assert self.outputs is not None
        self.carried.pop(name, None)  # until carried, the view shows where the worker wrote them
        view = None
        try:
            for _ in range(CARRY_ATTEMPTS):  # a later finish of the task there may move them aside
                view = await link.session_view(worker, name, quiet=False)
                written = view.get("outputs") if view is not None else None
                if not written:
                    return view
                carried = await self.outputs.carry(worker.index, name, written)
                if carried is not None:
                    self.carried[name] = carried
                    return view
            raise WebArenaLiveError(f"its files kept moving on worker {worker.index}")
        except Exception as error:  # Ray's and httpx's errors alike, a deadline passed: the verdict stands
            where = f"node {worker.node}"
            logger.error("webarena-live: the files of session %s stay on %s: %r", name, where, error)
        return view

    def carried_files(self, name: str) -> dict[str, str] | None:
        """Where session `name`'s carried files are on this machine now, by file name; None when none
        were carried."""
        if name not in self.carried:
            return None
        directory, attempt = self.carried[name]
        found = locate_attempt(directory, attempt)
        if found is None:
            return {}
        return {file: str(found / file) for file in ATTEMPT_FILES if (found / file).exists()}
