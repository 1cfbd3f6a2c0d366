"""Sessions: one agent attempting one task, found by name, and the notices of what happens to them.

A session is found by name — the username of the proxy credentials, or
`default` — and created the first time traffic or the control API names it.
It keeps its name and its current attempt (`runs.attempt`): starting it for a
task (or starting it again) replaces the attempt, with an empty trace and a
fresh journal; finishing it judges the attempt and freezes it.

The store owns the one `RunSettings` every attempt reads (replaced whole when
the proxy is reconfigured) and the one `NoticeBus` watchers subscribe to.

Everything here runs on the proxy's event loop thread, so nothing is locked.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from datetime import datetime
from enum import StrEnum
from typing import Any

from webarena_live.evaluator import EventRecord, NetworkEvent, NetworkTrace, Revalidations, Task, TaskResult
from webarena_live.replicas import Interference, Lease
from webarena_live.runs.attempt import Attempt
from webarena_live.runs.fault_log import FaultLine
from webarena_live.runs.finish_outcome import FinishOutcome
from webarena_live.runs.settings import RunSettings, SessionState

DEFAULT_SESSION = "default"
MAX_SESSION_NAME = 128
IDLE_TRACE_LIMIT = 10_000
"""Events a session without a task keeps in memory; older ones are only in its journal."""


class NoticeKind(StrEnum):
    """The kinds of notice on the bus; each is also the name of its message in the event streams (a
    `StrEnum`: it compares and serializes as its string). `EVENT` and `TRACE_REPLACED` are no messages
    of any stream: an event only wakes the streams, which read it from the trace when they write
    (control/streams.py), and a replaced idle trace tells them to finish the old trace before the new one."""

    EVENT = "event"
    TRACE_REPLACED = "trace-replaced"
    STARTED = "session"
    """A session started a task: its view (every start, the first included)."""
    RESTARTED = "restarted"
    """A session that had a task or events started again: what it had is replaced (before `STARTED`)."""
    FINISHED = "finished"
    """A finish judged the session: the result (it frees the session's address and lease)."""
    POOL = "pool"
    """The replica pool's word on a session: a lease started or ended, a replica's state changed."""


EVENT = NoticeKind.EVENT
TRACE_REPLACED = NoticeKind.TRACE_REPLACED
STARTED = NoticeKind.STARTED
RESTARTED = NoticeKind.RESTARTED
FINISHED = NoticeKind.FINISHED

logger = logging.getLogger(__name__)

_CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f]")

Subscriber = Callable[["Session", str, dict[str, Any] | None], None]
"""Called with the session, the notice's kind (a `NoticeKind`) and its JSON-ready payload (None for
`EVENT`)."""


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


class NoticeBus:
    """Who hears what happens to the sessions: subscribers to one session's notices or to every one's.

    A subscriber that raises is logged and dropped: a broken watcher must never break capture.
    """

    def __init__(self) -> None:
        self._subscribers: dict[str | None, list[Subscriber]] = {}
        """By session name; None: every session's."""
        self._roles: dict[str, Subscriber] = {}
        """The one subscriber of each role (`subscribe(role=...)`), told every notice but `EVENT`."""

    def __bool__(self) -> bool:
        return bool(self._subscribers)

    def count(self, session: str | None = None) -> int:
        """How many subscribe to `session`'s notices alone (to every session's when None)."""
        return len(self._subscribers.get(session, ()))

    def subscribe(
        self, subscriber: Subscriber, *, session: str | None = None, role: str | None = None
    ) -> Callable[[], None]:
        """Tell `subscriber` the notices of `session` (of every session when None); returns the call that
        unsubscribes it.

        A `role` has one subscriber, told every session's notices but `EVENT` (so capture, which only
        wakes watchers when there are some, stays free for it) and not counted as a watcher; a new one
        takes the place of the last (what a rebuilt control context does with the store it keeps:
        `control/context.py`, `SessionEnds`)."""
        if role is not None:
            self._roles[role] = subscriber

            def resign() -> None:
                if self._roles.get(role) is subscriber:
                    del self._roles[role]

            return resign
        self._subscribers.setdefault(session, []).append(subscriber)

        def unsubscribe() -> None:
            subscribers = self._subscribers.get(session)
            if subscribers is not None and subscriber in subscribers:
                subscribers.remove(subscriber)
                if not subscribers:
                    del self._subscribers[session]

        return unsubscribe

    def publish(self, session: Session, kind: str, payload: dict[str, Any] | None = None) -> None:
        """Tell the session's own subscribers, then everyone's, then (but an `EVENT`) the roles'."""
        for key in (session.name, None):
            for subscriber in list(self._subscribers.get(key, ())):
                try:
                    subscriber(session, kind, payload)
                except Exception:
                    logger.exception("a subscriber to session notices failed; dropping it")
                    subscribers = self._subscribers.get(key, [])
                    if subscriber in subscribers:
                        subscribers.remove(subscriber)
        if kind == EVENT:
            return
        for role, subscriber in list(self._roles.items()):
            try:
                subscriber(session, kind, payload)
            except Exception:  # kept: a role is the process's own bookkeeping, not a watcher
                logger.exception("the %s subscriber to session notices failed", role)


class Session:
    """One named session and its current attempt."""

    def __init__(self, name: str, store: SessionStore) -> None:
        self.name = name
        self._store = store
        self.proxy: str | None = None
        """The session's own proxy address (`http://HOST:PORT`) while it holds one."""
        self.attempt = Attempt(name, None, run=None, settings=store.current_settings)
        self.revalidations = Revalidations()
        """Records what the browser saw of its cache revalidations (a 304 that is the cached page to it).
        Kept across attempts, as the browser's cache is: a restarted session still knows the pages it saw."""

    # The current attempt's state, read often enough by the routes and streams to be named here.
    @property
    def trace(self) -> NetworkTrace:
        return self.attempt.trace

    @property
    def task(self) -> Task | None:
        return self.attempt.task

    @property
    def state(self) -> SessionState:
        return self.attempt.state

    @property
    def result(self) -> TaskResult | None:
        return self.attempt.result

    def start(
        self,
        task: Task,
        *,
        run: str | None = None,
        started: datetime | None = None,
        lease: Lease | None = None,
    ) -> None:
        """Begin (or begin again) an attempt at `task`, forgetting every event so far.

        `run` names the run directory the outputs go to (`OUT/<run>/<task_id>/`); `started` is the
        original start of a run resumed from its journal; `lease` the replicas it works on (kept beside
        its journal, so a resumed session keeps them).
        """
        before = self.attempt
        restarted = before.task is not None or len(before.trace) > 0 or before.dropped_idle_events > 0
        before.stop()
        self.attempt = Attempt(
            self.name, task, run=run, settings=self._store.current_settings, started=started
        )
        if lease is not None:  # the pool keeps it on disk (its lease book)
            self.attempt.lease = lease
        view = self.describe()
        if restarted:  # what watchers show of this session is replaced (a new session replaces nothing)
            self._store.notices.publish(self, RESTARTED, view)
        self._store.notices.publish(self, STARTED, view)

    def append(self, event: NetworkEvent | EventRecord) -> bool:
        """Record a captured event (or its record), as the browser saw it (`evaluator/revalidation.py`);
        False (and nothing recorded) once finished."""
        event = self.revalidations.browser_view(event)
        attempt = self.attempt
        if attempt.state is SessionState.IDLE and len(attempt.trace) >= IDLE_TRACE_LIMIT:
            attempt.drop_idle_events()
            self._store.notices.publish(self, TRACE_REPLACED, {})
        if not attempt.append(event):
            return False
        if self._store.notices:
            self._store.notices.publish(self, EVENT)
        return True

    def resume(
        self, events: Iterable[NetworkEvent | EventRecord], faults: list[FaultLine] | None = None
    ) -> None:
        """Begin the attempt just started with the events of the run it goes on from (its journal's),
        each as the browser saw it, as `append` records them, and the faults made in them."""
        seen = [self.revalidations.browser_view(event) for event in events]
        self.attempt.resume(seen, faults)
        if seen and self._store.notices:  # an `EVENT` only wakes a stream, which reads the trace itself
            self._store.notices.publish(self, EVENT)

    def finish(
        self, response: Any, *, interference: Interference | dict[str, Any] | None = None
    ) -> FinishOutcome:
        """Judge the current attempt with the agent's final answer (`Attempt.finish`), then say so.
        `interference`: the replica pool's word on other sessions' changes (`Interference`, or its JSON
        view), read before anything is judged: one that is none is a `ValueError` and changes nothing."""
        seen = None if interference is None else Interference.model_validate(interference)
        attempt = self.attempt
        outcome = attempt.finish(response, interference=None if seen is None else seen.view())
        if outcome.repeated:  # the first finish's outcome again: already logged and announced
            return outcome
        result = outcome.result
        logger.info(
            "session %s finished: task %s %s, score %g, %d events, %.1f s%s",
            self.name,
            attempt.task.task_id if attempt.task is not None else None,
            result.status.value,
            result.score,
            len(attempt.trace),
            (attempt.finished or attempt.started) - attempt.started,
            f"; earlier attempt kept in {outcome.earlier_attempt}" if outcome.earlier_attempt else "",
        )
        if seen is not None and seen.exposed:  # the verdict stands; say why to doubt it
            logger.warning(
                "session %s's verdict is exposed: %d mutation(s) by other sessions on its replicas (%s)",
                self.name, seen.count, ", ".join(sorted({m.session for m in seen.mutations})),
            )  # fmt: skip
        if result.lease_ended:
            logger.warning("session %s finished after its lease ended (%s)", self.name, result.lease_ended)
        self._store.notices.publish(self, FINISHED, result.to_dict())
        return outcome

    def event_view(self, index: int) -> dict[str, Any]:
        """An event as the trace route and the event stream show it."""
        return event_view(self.name, self.attempt.trace, index)

    def events_view(self, start: int = 0) -> Iterator[dict[str, Any]]:
        for index in range(max(0, start), len(self.attempt.trace)):
            yield self.event_view(index)

    def describe(self) -> dict[str, Any]:
        view = {"session": self.name, **self.attempt.describe()}
        if self.proxy is not None:
            view["proxy"] = self.proxy
        return view

    def close(self) -> None:
        self.attempt.stop()


class SessionStore:
    """All sessions by name, the settings their attempts read and the bus of their notices."""

    def __init__(self, settings: RunSettings | None = None) -> None:
        self.settings = settings if settings is not None else RunSettings()
        """Replaced whole (`configure`), never changed in place: attempts read it at each use."""
        self.notices = NoticeBus()
        self._sessions: dict[str, Session] = {}
        self.fault_plans_given = False
        """Whether any session was given a fault plan of its own (`give_fault_plan`): until then the
        proxy's per-request check is one look at its own plan (`proxy/faults.py`)."""

    def current_settings(self) -> RunSettings:
        return self.settings

    def configure(self, **changes: Any) -> RunSettings:
        """Replace the settings with these fields changed; attempts started from now on journal with
        them, and every finish from now on is judged and written with them."""
        self.settings = replace(self.settings, **changes)
        return self.settings

    def get(self, name: str) -> Session | None:
        return self._sessions.get(name)

    def give_fault_plan(self, session: Session, plan: Any) -> None:
        """Make `plan` (`runs/fault_plan.py`) the session's attempt's own (a start's `faults`), before its
        first request."""
        self.fault_plans_given = True
        session.attempt.fault_plan = plan

    def get_or_create(self, name: str) -> Session:
        session = self._sessions.get(name)
        if session is None:
            session = self._sessions[name] = Session(name, self)
        return session

    def start(
        self,
        name: str,
        task: Task,
        *,
        run: str | None = None,
        started: datetime | None = None,
        lease: Lease | None = None,
    ) -> Session:
        session = self.get_or_create(name)
        session.start(task, run=run, started=started, lease=lease)
        return session

    def __iter__(self) -> Iterator[Session]:
        return iter(list(self._sessions.values()))

    def __len__(self) -> int:
        return len(self._sessions)

    def close(self) -> None:
        for session in self._sessions.values():
            session.close()
