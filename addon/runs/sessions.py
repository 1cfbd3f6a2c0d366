"""Sessions (DESIGN §5): one agent attempting one task, and the journal of its events.

A session is found by name — the username of the proxy credentials, or
`default` — and created the first time traffic or the control API names it.
Starting a session for a task (or starting it again) gives it an empty trace
and a fresh journal file; finishing it freezes the trace and keeps the verdict.

Everything here runs on the proxy's event loop thread, so nothing is locked.

Capture is on the proxy's per-flow path, so a session does each event's work
once: the HAR entry is serialized once (`evaluator.har.event_to_har_json`) and
that text goes to the journal and, with an output directory, to the spool of
the session's `network.har` (`addon.har_spool`). A session with a task has a
`LiveRun` (addon/live_run.py), which prepares the evaluation while the session
runs and owns the finish.
"""

from __future__ import annotations

import functools
import logging
import re
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from webarena_live.addon.runs.attempt import LiveRun, RunSettings
from webarena_live.addon.runs.har_spool import HarSpool
from webarena_live.addon.runs.journal import EntryFilter, Journal, entry_json_bytes, journal_filename
from webarena_live.addon.runs.outputs import EARLIER_ATTEMPT
from webarena_live.evaluator import (
    NetworkEvent,
    NetworkTrace,
    SiteMap,
    Task,
    TaskResult,
)
from webarena_live.evaluator.trace import EventRecord

DEFAULT_SESSION = "default"
MAX_SESSION_NAME = 128
IDLE_TRACE_LIMIT = 10_000
"""Events a session without a task keeps in memory; older ones are only in its journal."""

TRACE_REPLACED = "trace-replaced"
"""The notice of an idle session's trace replaced at `IDLE_TRACE_LIMIT`: not a message of any stream,
it tells the streams reading the old trace (addon/api_streams.py) to finish it before the new one."""

logger = logging.getLogger(__name__)

_CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f]")


class SessionState(StrEnum):
    IDLE = "idle"
    """Traffic seen, no task started yet."""
    RUNNING = "running"
    FINISHED = "finished"


Listener = Callable[[str, dict[str, Any]], None]
"""Called with a lifecycle notice's kind (`reset`, `finished`, `TRACE_REPLACED`) and its JSON-ready
payload."""

StoreListener = Callable[[str, str, dict[str, Any]], None]
"""Called with a session name, a notice kind (a session's, or `session` when one starts) and its payload."""

StoreWaker = Callable[["Session"], None]
"""Called with the session that just captured an event."""


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


def event_view(session: str, trace: NetworkTrace, index: int) -> dict[str, Any]:
    """An event of `trace` (a session's, now or before a restart) as the trace route and the event
    streams show it."""
    return {"index": index, "session": session, **trace.summary(index)}


def _call_each(subscribers: list[Any], what: str, *args: Any) -> None:
    """Call every subscriber with `args`; one that raises is logged and dropped, because a broken
    subscriber must never break capture."""
    for subscriber in list(subscribers):
        try:
            subscriber(*args)
        except Exception:
            logger.exception("%s failed; dropping it", what)
            if subscriber in subscribers:
                subscribers.remove(subscriber)


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
        """Where the run settings (output directory, site map, ...) and store-wide listeners come from."""
        self.live: LiveRun | None = None
        """The attempt at the session's task (None while idle)."""
        self.listeners: list[Listener] = []
        self.wakers: list[Callable[[], None]] = []
        """Called (without arguments) for every captured event: an event stream reads the new events
        from the trace when it next writes, so capture builds no view of them."""
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
        if self.live is not None:
            self.live.stop()
        self.live = None
        if task is not None:
            self.live = LiveRun(
                task,
                self.trace,
                session=self.name,
                run=self.run,
                settings=self.store.settings if self.store is not None else RunSettings,
                on_finished=self.finish,
                label=journal_filename(self.name, task.task_id, when).removesuffix(".jsonl"),
                redacted_entries=self.journal_filter is not None,
            )

    @property
    def har_spool(self) -> HarSpool | None:
        """The spool of the running attempt's `network.har` (addon.har_spool), if any."""
        return self.live.har_spool if self.live is not None else None

    def start(self, task: Task, *, run: str | None = None) -> None:
        """Begin (or begin again) an attempt at `task`, forgetting every event so far.

        `run` names the run directory the outputs go to (`OUT/<run>/<task_id>/`).
        """
        if self.journal is not None:
            self.journal.close()
        self.run = run
        self._reset(task=task)
        self._notify("reset", self.describe())
        if self.store is not None:
            self.store.notify(self.name, "session", self.describe())

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
            self._notify(TRACE_REPLACED, {})
        self.trace.append(event)
        live = self.live
        journal, spool = self.journal, live.spool() if live is not None else None
        if journal is not None or spool is not None:
            entry_json = entry_json_bytes(event, self.journal_filter)  # serialized once for both
            if journal is not None:
                journal.write(event, entry_json)
            if spool is not None:
                spool.add(entry_json)
        if live is not None:
            live.added()
        if self.wakers or (self.store is not None and self.store.wakers):
            self._wake()
        return True

    def finish(self, result: TaskResult, outputs: dict[str, str] | None = None) -> None:
        """Mark the session finished with `result` (its `LiveRun` calls this once it has judged it)."""
        self.result = result
        self.outputs = outputs
        self.state = SessionState.FINISHED
        self.finished = time.time()
        if self.journal is not None:
            self.journal.close()
            self.journal.mark_finished()
        if self.live is not None:
            self.live.stop()
        task_id = self.task.task_id if self.task is not None else None
        earlier = outputs.get(EARLIER_ATTEMPT) if outputs else None
        logger.info(
            "session %s finished: task %s %s, score %g, %d events, %.1f s%s",
            self.name,
            task_id,
            result.status.value,
            result.score,
            len(self.trace),
            self.finished - self.started,
            f"; earlier attempt kept in {earlier}" if earlier else "",
        )
        self._notify("finished", result.to_dict())

    def prepare_evaluation(self) -> None:
        """Scan the running attempt's new events now (see `LiveRun.prepare_evaluation`)."""
        if self.live is not None:
            self.live.prepare_evaluation()

    def event_view(self, index: int) -> dict[str, Any]:
        """An event as the trace route and the event stream show it."""
        return event_view(self.name, self.trace, index)

    def events_view(self, start: int = 0) -> Iterator[dict[str, Any]]:
        for index in range(max(0, start), len(self.trace)):
            yield self.event_view(index)

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
        if self.live is not None:
            self.live.stop()

    def _wake(self) -> None:
        _call_each(self.wakers, "session waker")
        if self.store is not None:
            self.store.wake(self)

    def _notify(self, kind: str, payload: dict[str, Any]) -> None:
        _call_each(self.listeners, "session listener", kind, payload)
        if self.store is not None:
            self.store.notify(self.name, kind, payload)


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
        self.redact = False
        """Finishes leave cookies, credentials and passwords out of the written network.har."""
        self.data_checksum: str | None = None
        self.listeners: list[StoreListener] = []
        """Told every lifecycle notice of every session (the global event stream)."""
        self.wakers: list[StoreWaker] = []
        """Called with the session for every event any session captures (see `Session.wakers`)."""
        self._sessions: dict[str, Session] = {}

    def settings(self) -> RunSettings:
        """What every run's finish is judged and written with, as configured now."""
        return RunSettings(self.site_map, self.output_dir, self.redact, self.data_checksum)

    def notify(self, session: str, kind: str, payload: dict[str, Any]) -> None:
        _call_each(self.listeners, "event stream listener", session, kind, payload)

    def wake(self, session: Session) -> None:
        _call_each(self.wakers, "event stream waker", session)

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
