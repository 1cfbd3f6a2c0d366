"""Sessions (DESIGN §5): one agent attempting one task, and the journal of its events.

A session is found by name — the username of the proxy credentials, or
`default` — and created the first time traffic or the control API names it.
Starting a session for a task (or starting it again) gives it an empty trace
and a fresh journal file; finishing it freezes the trace and keeps the verdict.

Everything here runs on the proxy's event loop thread, so nothing is locked.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import IO, Any

from evaluator.har import event_to_har_entry
from evaluator.results import TaskResult
from evaluator.tasks import Task
from evaluator.trace import NetworkEvent, NetworkTrace

DEFAULT_SESSION = "default"
MAX_SESSION_NAME = 128
IDLE_TRACE_LIMIT = 10_000
"""Events a session without a task keeps in memory; older ones are only in its journal."""

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


Listener = Callable[[str, dict[str, Any]], None]
"""Called with a notice kind (`event`, `reset`, `finished`) and its JSON-ready payload."""


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


class Journal:
    """Append-only JSON-lines file of one session run: each line is one event as a HAR entry.

    The file is opened at the first event and written unbuffered, so every
    line reaches the OS in one write call (no fsync): a crash of the proxy
    process loses nothing already captured, and `evaluator.har.load_trace`
    reads the file back.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: IO[bytes] | None = None
        self._broken = False
        self.lines = 0

    def write(self, event: NetworkEvent) -> None:
        if self._broken:
            return
        try:
            if self._file is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._file = self.path.open("ab", buffering=0)
            self._file.write(_LINE_ENCODER.encode(event_to_har_entry(event)).encode("ascii") + b"\n")
            self.lines += 1
        except OSError as error:
            # A full disk must not take the proxy down; say so once and keep serving.
            self._broken = True
            logger.error("journal %s stopped: %s", self.path, error)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


class Session:
    """One named session: its task, trace, journal, state and (once finished) verdict."""

    def __init__(self, name: str, *, journal_dir: Path | None) -> None:
        self.name = name
        self.journal_dir = journal_dir
        self.listeners: list[Listener] = []
        self.task: Task | None = None
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
        if self.journal_dir is None:
            self.journal: Journal | None = None
        else:
            name = journal_filename(self.name, task.task_id if task else None, datetime.now(UTC))
            self.journal = Journal(self.journal_dir / name)

    def start(self, task: Task) -> None:
        """Begin (or begin again) an attempt at `task`, forgetting every event so far."""
        if self.journal is not None:
            self.journal.close()
        self._reset(task=task)
        self._notify("reset", self.describe())

    def append(self, event: NetworkEvent) -> bool:
        """Record a captured event; False (and nothing recorded) once the session is finished."""
        if self.state is SessionState.FINISHED:
            self.late_events += 1
            return False
        if self.state is SessionState.IDLE and len(self.trace) >= IDLE_TRACE_LIMIT:
            # Nobody will evaluate an idle trace (starting a task clears it), so a proxy used for
            # hours without tasks must not hold every event in memory; the journal keeps them all.
            self.dropped_idle_events += len(self.trace)
            self.trace = NetworkTrace()
        self.trace.append(event)
        if self.journal is not None:
            self.journal.write(event)
        if self.listeners:
            self._notify("event", self.event_view(len(self.trace) - 1, event))
        return True

    def finish(self, result: TaskResult, *, outputs: dict[str, str] | None = None) -> None:
        self.result = result
        self.outputs = outputs
        self.state = SessionState.FINISHED
        self.finished = time.time()
        if self.journal is not None:
            self.journal.close()
        self._notify("finished", result.to_dict())

    def event_view(self, index: int, event: NetworkEvent) -> dict[str, Any]:
        """An event as the trace route and the event stream show it."""
        return {"index": index, "session": self.name, **event.summary()}

    def events_view(self, start: int = 0) -> Iterator[dict[str, Any]]:
        events = self.trace.events
        for index in range(max(0, start), len(events)):
            yield self.event_view(index, events[index])

    def describe(self) -> dict[str, Any]:
        task = self.task
        view: dict[str, Any] = {
            "session": self.name,
            "state": self.state.value,
            "task_id": task.task_id if task else None,
            "intent": task.intent if task else None,
            "sites": list(task.sites) if task else None,
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

    def _notify(self, kind: str, payload: dict[str, Any]) -> None:
        for listener in list(self.listeners):
            try:
                listener(kind, payload)
            except Exception:  # a broken subscriber must never break capture
                logger.exception("session listener failed; dropping it")
                self.listeners.remove(listener)


class SessionStore:
    """All sessions by name. `get_or_create` is how traffic and the control API find one."""

    def __init__(self, *, journal_dir: Path | None = None) -> None:
        self.journal_dir = journal_dir
        self._sessions: dict[str, Session] = {}

    def get(self, name: str) -> Session | None:
        return self._sessions.get(name)

    def get_or_create(self, name: str) -> Session:
        session = self._sessions.get(name)
        if session is None:
            session = self._sessions[name] = Session(name, journal_dir=self.journal_dir)
        return session

    def move_journal(self, journal_dir: Path | None) -> None:
        """Journal the next run of every session (and every new session) under `journal_dir`."""
        self.journal_dir = journal_dir
        for session in self._sessions.values():
            session.journal_dir = journal_dir

    def start(self, name: str, task: Task) -> Session:
        session = self.get_or_create(name)
        session.start(task)
        return session

    def __iter__(self) -> Iterator[Session]:
        return iter(list(self._sessions.values()))

    def __len__(self) -> int:
        return len(self._sessions)

    def close(self) -> None:
        for session in self._sessions.values():
            session.close()
