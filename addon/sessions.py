"""Sessions (DESIGN §5): one agent attempting one task, and the journal of its events.

A session is found by name — the username of the proxy credentials, or
`default` — and created the first time traffic or the control API names it.
Starting a session for a task (or starting it again) gives it an empty trace
and a fresh journal file; finishing it freezes the trace and keeps the verdict.

Everything here runs on the proxy's event loop thread, so nothing is locked.

Capture is on the proxy's per-flow path, so a session does each event's work
once: the HAR entry is serialized once (`evaluator.har.event_to_har_json`) and
that text goes to the journal and, with an output directory, to the spool of
the session's `network.har` (`addon.har_spool`). Evaluation is prepared while
the session runs: a short timer after new events lets the task's network
evaluators scan them (they memoize per event and resume where they stopped),
so a finish only looks at the last few events, whatever the session's length.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import re
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import IO, Any

from webarena_live.addon.har_spool import SPOOL_SUBDIR, HarSpool
from webarena_live.evaluator.har import event_to_har_entry, event_to_har_json
from webarena_live.evaluator.network_evaluator import evaluate_network
from webarena_live.evaluator.results import TaskResult
from webarena_live.evaluator.sites import SiteMap
from webarena_live.evaluator.tasks import NetworkEventEvaluatorConfig, Task
from webarena_live.evaluator.trace import EventRecord, NetworkEvent, NetworkTrace, as_event

DEFAULT_SESSION = "default"
MAX_SESSION_NAME = 128
IDLE_TRACE_LIMIT = 10_000
"""Events a session without a task keeps in memory; older ones are only in its journal."""
PREPARE_DELAY = 0.1
"""Seconds after an event before the task's evaluators scan the new events (batched, off the flow path)."""

logger = logging.getLogger(__name__)

# ASCII escapes keep undecodable header bytes (lone surrogates) writable; one encoder, built once.
_LINE_ENCODER = json.JSONEncoder(separators=(",", ":"), check_circular=False)

_UNSAFE_FILENAME = re.compile(r"[^A-Za-z0-9_.@-]+")
_CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f]")


class SessionState(StrEnum):
    IDLE = "idle"
    """Traffic seen, no task started yet."""
    RUNNING = "running"
    FINISHED = "finished"


EntryFilter = Callable[[dict[str, Any]], dict[str, Any]]
"""Rewrites a HAR entry before it is journaled (e.g. `addon.redact.redact_har_entry`)."""

Listener = Callable[[str, dict[str, Any]], None]
"""Called with a notice kind (`event`, `reset`, `finished`) and its JSON-ready payload."""


@functools.lru_cache(maxsize=1024)  # asked for every request that names a session
def session_name_problem(name: str) -> str | None:
    """Why `name` cannot name a session, or None when it can."""
    if not name:
        return "a session name must not be empty"
    if len(name) > MAX_SESSION_NAME:
        return f"a session name must be at most {MAX_SESSION_NAME} characters"
    if _CONTROL_CHARACTERS.search(name):
        return "a session name must not contain control characters"
    return None


def journal_filename(session: str, task_id: int | None, when: datetime) -> str:
    """`<session>-<task id or idle>-<UTC time>.jsonl`, with the session name made filesystem-safe."""
    safe = _UNSAFE_FILENAME.sub("_", session).strip(".") or "_"
    task = "idle" if task_id is None else str(task_id)
    return f"{safe}-{task}-{when.strftime('%Y%m%dT%H%M%S.%f')}.jsonl"


def entry_json_bytes(event: NetworkEvent | EventRecord, entry_filter: EntryFilter | None = None) -> bytes:
    """The event's HAR entry as compact ASCII JSON, through `entry_filter` (redaction) if any."""
    if entry_filter is None:
        return event_to_har_json(event).encode("ascii")
    return _LINE_ENCODER.encode(entry_filter(event_to_har_entry(as_event(event)))).encode("ascii")


FINISHED_INDEX = "finished.txt"
"""In a journal directory: the names of the journals whose run finished, one a line."""


class Journal:
    """Append-only JSON-lines file of one session run: each line is one event as a HAR entry.

    The file is opened at the first event and written unbuffered, one
    `write` per line, while the proxy still holds the flow's response: when
    the agent sees an answer, its event is with the operating system. No
    fsync: a crash of the proxy process loses nothing already captured (a
    power loss can lose what the kernel had not flushed yet), and
    `evaluator.har.load_trace` reads the file back.
    """

    def __init__(self, path: Path, *, entry_filter: EntryFilter | None = None) -> None:
        self.path = path
        self.entry_filter = entry_filter
        self._file: IO[bytes] | None = None
        self._broken = False
        self.lines = 0
        """Lines written to the file so far."""

    def write(self, event: NetworkEvent | EventRecord, entry_json: bytes | None = None) -> None:
        """Append one line: `entry_json` when the caller already has it, else the event serialized."""
        if self._broken:
            return
        if entry_json is None:
            entry_json = entry_json_bytes(event, self.entry_filter)
        try:
            if self._file is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._file = self.path.open("ab", buffering=0)
            self._file.write(entry_json + b"\n")
            self.lines += 1
        except OSError as error:
            # A full disk must not take the proxy down; say so once and keep serving.
            self._broken = True
            logger.error("journal %s stopped: %s", self.path, error)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()

    def mark_finished(self) -> None:
        """Note in the directory's index that this run finished, so a restart does not offer to resume it."""
        if not self.lines:
            return
        try:
            with (self.path.parent / FINISHED_INDEX).open("a", encoding="utf-8") as index:
                index.write(self.path.name + "\n")
        except OSError as error:
            logger.error("journal index %s: %s", self.path.parent / FINISHED_INDEX, error)
            self._file = None


class Session:
    """One named session: its task, trace, journal, state and (once finished) verdict."""

    def __init__(
        self,
        name: str,
        *,
        journal_dir: Path | None,
        journal_filter: EntryFilter | None = None,
        store: SessionStore | None = None,
    ) -> None:
        self.name = name
        self.journal_dir = journal_dir
        self.journal_filter = journal_filter
        self.store = store
        """Where the output directory and site map (for the spool and evaluation warm-up) come from."""
        self.har_spool: HarSpool | None = None
        self._prepare_timer: asyncio.TimerHandle | None = None
        self.listeners: list[Listener] = []
        self.task: Task | None = None
        self.run: str | None = None
        self.state = SessionState.IDLE
        self.result: TaskResult | None = None
        self.outputs: dict[str, str] | None = None
        self.late_events = 0
        """Events that arrived after the session finished (not in the trace)."""
        self.dropped_idle_events = 0
        self._reset(task=None)

    def _reset(self, *, task: Task | None) -> None:
        self.task = task
        self.trace = NetworkTrace()
        self.result = None
        self.outputs = None
        self.late_events = 0
        self.dropped_idle_events = 0
        self.started = time.time()
        self.finished: float | None = None
        self.state = SessionState.IDLE if task is None else SessionState.RUNNING
        when = datetime.now(UTC)
        if self.journal_dir is None:
            self.journal: Journal | None = None
        else:
            name = journal_filename(self.name, task.task_id if task else None, when)
            self.journal = Journal(self.journal_dir / name, entry_filter=self.journal_filter)
        self._stop_extras()
        output_dir = self.store.output_dir if self.store is not None else None
        if task is not None and output_dir is not None:
            label = journal_filename(self.name, task.task_id, when).removesuffix(".jsonl")
            self.har_spool = HarSpool(
                output_dir / SPOOL_SUBDIR, label=label, redacted=self.journal_filter is not None
            )

    def _stop_extras(self) -> None:
        """Drop the HAR spool and any pending evaluation warm-up of the run that ends."""
        if self.har_spool is not None:
            self.har_spool.discard()
            self.har_spool = None
        if self._prepare_timer is not None:
            self._prepare_timer.cancel()
            self._prepare_timer = None

    def start(self, task: Task, *, run: str | None = None) -> None:
        """Begin (or begin again) an attempt at `task`, forgetting every event so far.

        `run` names the run directory the outputs go to (`OUT/<run>/<task_id>/`).
        """
        if self.journal is not None:
            self.journal.close()
        self.run = run
        self._reset(task=task)
        self._notify("reset", self.describe())

    def append(self, event: NetworkEvent | EventRecord) -> bool:
        """Record a captured event (or its record); False (and nothing recorded) once finished."""
        if self.state is SessionState.FINISHED:
            self.late_events += 1
            return False
        if self.state is SessionState.IDLE and len(self.trace) >= IDLE_TRACE_LIMIT:
            # Nobody will evaluate an idle trace (starting a task clears it), so a proxy used for
            # hours without tasks must not hold every event in memory; the journal keeps them all.
            self.dropped_idle_events += len(self.trace)
            self.trace = NetworkTrace()
        self.trace.append(event)
        journal, spool = self.journal, self.har_spool
        if spool is not None and not spool.usable:
            spool = None
        if journal is not None or spool is not None:
            entry_json = entry_json_bytes(event, self.journal_filter)  # serialized once for both
            if journal is not None:
                journal.write(event, entry_json)
            if spool is not None:
                spool.add(entry_json)
        if self.state is SessionState.RUNNING and self._prepare_timer is None:
            self._schedule_prepare()
        if self.listeners:
            self._notify("event", self.event_view(len(self.trace) - 1, as_event(event)))
        return True

    def finish(self, result: TaskResult, *, outputs: dict[str, str] | None = None) -> None:
        self.result = result
        self.outputs = outputs
        self.state = SessionState.FINISHED
        self.finished = time.time()
        if self.journal is not None:
            self.journal.close()
            self.journal.mark_finished()
        self._stop_extras()
        self._notify("finished", result.to_dict())

    def take_har_spool(self, *, redacted: bool) -> HarSpool | None:
        """The spool of this run's `network.har`, when it holds every event as the outputs need them.

        The caller commits it (`HarSpool.commit`); the session lets go of it either way.
        """
        spool, self.har_spool = self.har_spool, None
        if spool is None:
            return None
        if not spool.usable or spool.redacted != redacted or spool.entries != len(self.trace):
            spool.discard()
            return None
        return spool

    # --- evaluation warm-up ----------------------------------------------------------------------

    def _schedule_prepare(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # not inside the proxy (a unit test): the finish does all the work, as offline
        self._prepare_timer = loop.call_later(PREPARE_DELAY, self.prepare_evaluation)

    def prepare_evaluation(self) -> None:
        """Let the task's network evaluators scan the events captured since they last looked.

        They memoize what they learn per event and per trace, so the finish's own
        evaluation only scans what arrived after this. Results are thrown away;
        errors are left for the finish to report.
        """
        self._prepare_timer = None
        task, store = self.task, self.store
        if self.state is not SessionState.RUNNING or task is None or store is None or not len(self.trace):
            return
        try:
            site_map = store.site_map.complete_from_trace(task.sites, self.trace)
            for config in task.eval:
                if isinstance(config, NetworkEventEvaluatorConfig):
                    evaluate_network(config, self.trace, task=task, site_map=site_map)
        except Exception:  # the finish evaluates again and reports whatever is wrong
            logger.debug("evaluation warm-up of session %r failed", self.name, exc_info=True)

    def event_view(self, index: int, event: NetworkEvent) -> dict[str, Any]:
        """An event as the trace route and the event stream show it."""
        return {"index": index, "session": self.name, **event.summary()}

    def events_view(self, start: int = 0) -> Iterator[dict[str, Any]]:
        start = max(0, start)
        for index, event in enumerate(self.trace.iter_from(start), start):
            yield self.event_view(index, event)

    def describe(self) -> dict[str, Any]:
        task = self.task
        view: dict[str, Any] = {
            "session": self.name,
            "state": self.state.value,
            "task_id": task.task_id if task else None,
            "intent": task.intent if task else None,
            "sites": list(task.sites) if task else None,
            "run": self.run,
            "counts": self.trace.counts(),
            "started": self.started,
            "finished": self.finished,
            "journal": str(self.journal.path) if self.journal and self.journal.lines else None,
        }
        if self.late_events:
            view["late_events"] = self.late_events
        if self.dropped_idle_events:
            view["dropped_idle_events"] = self.dropped_idle_events
        if self.result is not None:
            view["result"] = {"status": self.result.status.value, "score": self.result.score}
        if self.outputs:
            view["outputs"] = self.outputs
        return view

    def close(self) -> None:
        if self.journal is not None:
            self.journal.close()
        self._stop_extras()

    def _notify(self, kind: str, payload: dict[str, Any]) -> None:
        for listener in list(self.listeners):
            try:
                listener(kind, payload)
            except Exception:  # a broken subscriber must never break capture
                logger.exception("session listener failed; dropping it")
                self.listeners.remove(listener)


class SessionStore:
    """All sessions by name. `get_or_create` is how traffic and the control API find one."""

    def __init__(self, *, journal_dir: Path | None = None, journal_filter: EntryFilter | None = None) -> None:
        self.journal_dir = journal_dir
        self.journal_filter = journal_filter
        """Applied to every journal line of every session (redaction); set before traffic arrives."""
        self.output_dir: Path | None = None
        """With an output directory, task runs spool their `network.har` as they go (`addon.har_spool`)."""
        self.site_map = SiteMap()
        """The site map running sessions prepare their evaluation with (the finish's, for the same plans)."""
        self._sessions: dict[str, Session] = {}

    def get(self, name: str) -> Session | None:
        return self._sessions.get(name)

    def get_or_create(self, name: str) -> Session:
        session = self._sessions.get(name)
        if session is None:
            session = Session(
                name, journal_dir=self.journal_dir, journal_filter=self.journal_filter, store=self
            )
            self._sessions[name] = session
        return session

    def move_journal(self, journal_dir: Path | None) -> None:
        """Journal the next run of every session (and every new session) under `journal_dir`."""
        self.journal_dir = journal_dir
        for session in self._sessions.values():
            session.journal_dir = journal_dir

    def start(self, name: str, task: Task, *, run: str | None = None) -> Session:
        session = self.get_or_create(name)
        session.start(task, run=run)
        return session

    def __iter__(self) -> Iterator[Session]:
        return iter(list(self._sessions.values()))

    def __len__(self) -> int:
        return len(self._sessions)

    def close(self) -> None:
        for session in self._sessions.values():
            session.close()
