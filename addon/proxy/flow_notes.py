"""Annotate captured flows for mitmweb (`serve --web`): session, event type, and the evaluator an
event satisfies, in mitmproxy's own conventions (a flow's `comment` and `marked`).

Only loaded when the `webarena_annotate_flows` option is on, so plain `serve` pays one attribute
check per flow. Progress is asked at most every `CHECK_DELAY` per session: it reads the evaluators'
kept state, but a busy session captures far more often than anyone can watch.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict

from mitmproxy import ctx, hooks, http

from webarena_live.runs.attempt import Attempt
from webarena_live.runs.sessions import Session

logger = logging.getLogger(__name__)

CHECK_DELAY = 0.1
"""Seconds between progress checks of one session (the first check waits this long after an event)."""

FLOWS_KEPT = 20_000
"""Flows remembered per session by event index, to mark the one an evaluator names; the oldest are
forgotten first (an evaluator satisfied by an older event is still listed in `/progress`)."""

SATISFIED_MARK = ":star:"
VIOLATED_MARK = ":warning:"
_NOTES_KEY = "webarena_live.notes"
"""flow.metadata: the evaluator notes appended to its comment, so a changed verdict can remove them."""


class _Run:
    """What is known of one session's running attempt (a restart starts a new one)."""

    def __init__(self, attempt: Attempt) -> None:
        self.attempt = attempt
        self.flows: OrderedDict[int, http.HTTPFlow] = OrderedDict()
        self.notes: dict[int, tuple[int, str]] = {}
        """Per evaluator: the event index whose flow carries its note, and the note."""
        self.timer: asyncio.TimerHandle | None = None


class FlowNotes:
    """Comments and marks on the flows of every session (see the module docstring)."""

    def __init__(self) -> None:
        self._runs: dict[str, _Run] = {}

    def captured(self, flow: http.HTTPFlow, session: Session) -> None:
        """`flow` was just appended to `session`'s trace as its last event."""
        index = len(session.trace) - 1
        if index < 0:
            return  # not recorded (a finished session)
        event = next(session.trace.iter_from(index))
        flow.comment = f"session {session.name} · {event.event_type.value}"
        run = self._runs.get(session.name)
        if run is None or run.attempt is not session.attempt:
            if run is not None and run.timer is not None:
                run.timer.cancel()
            run = self._runs[session.name] = _Run(session.attempt)
        run.flows[index] = flow
        if len(run.flows) > FLOWS_KEPT:
            run.flows.popitem(last=False)
        if session.task is not None and run.timer is None:
            run.timer = asyncio.get_running_loop().call_later(CHECK_DELAY, self._check, session.name, run)

    def _check(self, name: str, run: _Run) -> None:
        run.timer = None
        if run.attempt.task is None or self._runs.get(name) is not run:
            return
        try:
            progress = run.attempt.progress()
        except Exception:  # the finish reports whatever is wrong; notes are a convenience
            logger.debug("progress of session %r failed", name, exc_info=True)
            return
        changed: list[http.HTTPFlow] = []
        for item in progress.network:
            deciding = item.event if (item.satisfied != item.should_not_exist) else None
            number = item.evaluator + 1  # as the dashboard numbers them
            if item.should_not_exist:
                note = f"violates NetworkEventEvaluator #{number} (should not exist)"
            else:
                note = f"satisfies NetworkEventEvaluator #{number}"
            before = run.notes.get(item.evaluator)
            if before is not None and (before[0] != deciding or before[1] != note):
                old = run.flows.get(before[0])
                if old is not None and _remove_note(old, before[1]):
                    changed.append(old)
                del run.notes[item.evaluator]
            if deciding is None or item.evaluator in run.notes:
                continue
            run.notes[item.evaluator] = (deciding, note)
            flow = run.flows.get(deciding)
            if flow is not None:
                _add_note(flow, note, VIOLATED_MARK if item.should_not_exist else SATISFIED_MARK)
                changed.append(flow)
        if changed:
            ctx.master.addons.trigger(hooks.UpdateHook(changed))  # mitmweb shows flows as they change


def _add_note(flow: http.HTTPFlow, note: str, mark: str) -> None:
    notes: list[tuple[str, str]] = flow.metadata.setdefault(_NOTES_KEY, [])
    notes.append((note, mark))
    flow.comment += f" · {note}"
    flow.marked = mark


def _remove_note(flow: http.HTTPFlow, note: str) -> bool:
    notes: list[tuple[str, str]] = flow.metadata.get(_NOTES_KEY, [])
    kept = [(text, mark) for text, mark in notes if text != note]
    if len(kept) == len(notes):
        return False
    flow.metadata[_NOTES_KEY] = kept
    flow.comment = flow.comment.replace(f" · {note}", "")
    flow.marked = kept[-1][1] if kept else ""
    return True
