"""One attempt: a session's run from its start to its finish, and everything only it has.

An attempt owns its task (None for traffic seen before any task started), its
trace, its journal, the spool of its `network.har`, the evaluation it prepares
while it runs, and its finish: evaluate, write the outputs, freeze the trace.
A session (`runs.sessions`) keeps its name and its current attempt; starting
again replaces the attempt, so nothing of one attempt outlives it by accident.

Capture is on the proxy's per-flow path, so an attempt does each event's work
once: the HAR entry is serialized once (`event_to_har_json`) and that text goes
to the journal and, with an output directory, to the spool.

Everything runs on the proxy's event loop thread: no locks.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
import uuid
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from webarena_live.evaluator import (
    ATTEMPT_FILES,
    EARLIER_ATTEMPT,
    FAILING_STATUSES,
    RESULT_FILE,
    EventRecord,
    FinalAnswer,
    NetworkEvent,
    NetworkTrace,
    Task,
    TaskProgress,
    TaskResult,
    attempt_id,
    evaluate_task,
    excuse,
    locate_attempt,
    prepare_evaluation,
    site_errors_field,
    site_origins,
    sites_answered_fields,
    task_progress,
)
from webarena_live.replicas import Lease
from webarena_live.runs.answers import different_answer
from webarena_live.runs.attempt_view import attempt_view
from webarena_live.runs.fault_log import FaultLine, FaultLog, journaled_faults, requests_sent
from webarena_live.runs.finish_outcome import FinishOutcome, FinishRefused, no_task_detail
from webarena_live.runs.har_spool import SPOOL_SUBDIR, HarSpool
from webarena_live.runs.journal import Journal, entry_json_bytes, journal_filename
from webarena_live.runs.outputs import write_attempt
from webarena_live.runs.settings import RunSettings, SessionState
from webarena_live.runs.uncaptured import Unmapped, said_of

BROWSER_REQUESTS_LISTED = 20
"""The browser's own requests an attempt lists (the newest); all are counted."""

PREPARE_DELAY = 0.1
"""Seconds after an event before the task's evaluators scan the new events (batched, off the flow path)."""

logger = logging.getLogger(__name__)


class Attempt:
    """Session `session`'s attempt at `task` (None: idle traffic); `finish` judges it once."""

    def __init__(
        self,
        session: str,
        task: Task | None,
        *,
        run: str | None,
        settings: Callable[[], RunSettings],
        started: datetime | None = None,
    ) -> None:
        """`started`: when the attempt began, for one resumed from its journal (its run goes on: its
        times, its log lines and its journal's name keep the original start)."""
        self.session = session
        self.task = task
        self.run = run
        """The run directory its outputs go to (`OUT/<run>/<task_id>/`), if named."""
        self.trace = NetworkTrace()
        self.state = SessionState.IDLE if task is None else SessionState.RUNNING
        self.started = started.timestamp() if started is not None else time.time()
        self.finished: float | None = None
        self.result: TaskResult | None = None
        self.answer: FinalAnswer | None = None
        """The final answer the finish judged: a later finish is answered for it alone."""
        self._outcome: FinishOutcome | None = None
        self.id = uuid.uuid4().hex
        """Names the attempt in its files' `ATTEMPT_FILE`, so they are found wherever they are moved."""
        self._written_to: Path | None = None
        """The task folder the finish wrote to."""
        self._found: Path | None = None
        """Where the files were last found (the task folder, or where a later attempt moved them)."""
        self._earlier: str | None = None
        """Where the finish moved the task's earlier attempt, if it found one."""
        self.late_events = 0
        """Events that arrived after the finish (not in the trace)."""
        self.browser_requests = 0
        """Requests of the browser itself (update and connectivity checks) seen in this attempt's
        traffic and kept out of its trace (`proxy/browser_traffic.py`)."""
        self.recent_browser_requests: deque[str] = deque(maxlen=BROWSER_REQUESTS_LISTED)
        """The newest `BROWSER_REQUESTS_LISTED` of them, as `METHOD URL`."""
        self.unmapped = Unmapped()
        """Requests to hosts outside the site map that became no event (a tunnel that failed)."""
        self.dropped_idle_events = 0
        """Events of an idle attempt no longer held in memory (its journal has them)."""
        self.faults_injected: list[dict[str, Any]] = []
        """The faults the proxy made on purpose in this attempt's traffic (`proxy/faults.py`), in order."""
        self.resumed_events = 0
        """How many of its first events come from the journal of the run it goes on from."""
        self.fault_plan: Any = None
        """The session's own fault plan (`POST /sessions` `faults`; `runs/fault_plan.py`), else None."""
        self.site_errors: dict[str, Any] | None = None
        """Its finish's `site_errors` (`sites_answered`), written into `attempt.json`."""
        self._settings = settings
        """The proxy's settings as they are now (the session store's): read at each use."""
        start = settings()
        self._entry_filter = start.journal_filter
        # A resumed run's journal is named a microsecond after the one it goes on from: newer (so a
        # second resume finds it), and still saying when the run began.
        # A fresh run's journal is named by the attempt's own start, which a resume reads back.
        fresh = datetime.fromtimestamp(self.started, UTC)
        named = started + timedelta(microseconds=1) if started is not None else fresh
        label = journal_filename(session, task.task_id if task else None, named)
        self.journal: Journal | None = None
        self.fault_log: FaultLog | None = None
        if start.journal_dir is not None:
            self.journal = Journal(start.journal_dir / label, entry_filter=self._entry_filter)
            self.fault_log = FaultLog(self.journal.path)
        self.har_spool: HarSpool | None = None
        if task is not None and start.output_dir is not None:
            self.har_spool = HarSpool(
                start.output_dir / SPOOL_SUBDIR,
                label=label.removesuffix(".jsonl"),
                redacted=self._entry_filter is not None,
            )
        self._prepare_timer: asyncio.TimerHandle | None = None
        self.lease: Lease | None = None
        """The replicas it works on (`replicas/lease.py`: the pool's own record), when the site map has
        replicas to lease."""

    # --- while it runs ---------------------------------------------------------------------------

    def note_browser_request(self, method: str, url: str) -> None:
        """A request of the browser itself: counted and listed, never an event."""
        self.browser_requests += 1
        self.recent_browser_requests.append(f"{method} {url}")

    def append(self, event: NetworkEvent | EventRecord) -> bool:
        """Record a captured event (or its record); False (and nothing recorded) once finished."""
        if self.state is SessionState.FINISHED:
            self.late_events += 1
            return False
        self.trace.append(event)
        journal, spool = self.journal, self.har_spool
        if spool is not None and not spool.usable:
            spool = None
        if journal is not None or spool is not None:
            entry_json = entry_json_bytes(event, self._entry_filter)  # serialized once for both
            if journal is not None:
                journal.write(event, entry_json)
            if spool is not None:
                spool.add(entry_json)
        if self.task is not None and self._prepare_timer is None:
            self._schedule_preparation()
        return True

    def add_fault(self, line: FaultLine) -> None:
        """A fault made on purpose in this attempt's traffic: listed, and journaled beside its journal
        (again, as it ended, when its record is listed already: a latency its client gave up on)."""
        ended = any(listed is line.record for listed in self.faults_injected)
        if not ended:
            self.faults_injected.append(line.record)
        if self.fault_log is not None:
            self.fault_log.append(line, ended=ended)

    def resume(self, events: list[NetworkEvent | EventRecord], faults: list[FaultLine] | None = None) -> None:
        """Begin with the events of the run this attempt goes on from (its journal's), and the faults
        made in them: recorded as `append` and `add_fault` record them, each file written whole at once
        (the faults first: a crash between the two leaves the journal it goes on from the newest)."""
        lines = [entry_json_bytes(event, self._entry_filter) for event in events]
        spool = self.har_spool if self.har_spool is not None and self.har_spool.usable else None
        for event, line in zip(events, lines, strict=True):
            self.trace.append(event)
            if spool is not None:
                spool.add(line)
        self.resumed_events = len(events)
        if faults:
            kept = journaled_faults(faults, self.resumed_requests())
            self.faults_injected = [fault.record for fault in kept]
            if self.fault_log is not None:
                self.fault_log.write_resumed(kept)
        if self.journal is not None:
            self.journal.write_resumed(lines)
        if events and self.task is not None and self._prepare_timer is None:
            self._schedule_preparation()

    def resumed_requests(self) -> dict[tuple[str, str], int]:
        """The requests to the sites its resumed events hold, by method and URL as the site map writes
        them (`requests_sent`): where its fault draws go on counting from. Empty for a fresh attempt."""
        resumed = itertools.islice(self.trace, self.resumed_events)
        return requests_sent(resumed, self._settings().site_map) if self.resumed_events else {}

    def drop_idle_events(self) -> None:
        """Start an idle attempt's trace afresh: nobody will evaluate it (starting a task replaces the
        attempt), so a proxy used for hours without tasks must not hold every event in memory; the
        journal keeps them all."""
        self.dropped_idle_events += len(self.trace)
        self.trace = NetworkTrace()

    def _schedule_preparation(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # not inside the proxy (a unit test): the finish does all the work, as offline
        self._prepare_timer = loop.call_later(PREPARE_DELAY, self.prepare_evaluation)

    def prepare_evaluation(self) -> None:
        """Let the task's network evaluators scan the events captured since they last looked, so the
        finish's own evaluation only scans what arrived after this."""
        self._prepare_timer = None
        if self.task is None or self.state is not SessionState.RUNNING:
            return
        try:
            prepare_evaluation(self.task, self.trace, site_map=self._settings().site_map)
        except Exception:  # the finish evaluates again and reports whatever is wrong
            logger.debug("evaluation warm-up of session %r failed", self.session, exc_info=True)

    def stop(self) -> None:
        """End without a finish (restart, shutdown): close the journal, drop the spool and any warm-up."""
        if self.journal is not None:
            self.journal.close()
        if self.har_spool is not None:
            self.har_spool.discard()
            self.har_spool = None
        if self._prepare_timer is not None:
            self._prepare_timer.cancel()
            self._prepare_timer = None

    # --- what a finish would say now ---------------------------------------------------------------

    def progress(self) -> TaskProgress:
        """Each network evaluator of the task judged on the trace so far (the finish's state, kept)."""
        return task_progress(self._task(), self.trace, site_map=self._settings().site_map)

    def preview(self, response: Any) -> TaskResult:
        """The result a finish with `response` would give now, marked `preview`; nothing is written or
        finished. Refused (`FinishRefused`) exactly when the finish would be; a finished attempt
        previews what a finish answers it then: its own result for the same answer."""
        answer = FinalAnswer.read(response)
        if self.state is SessionState.FINISHED and self._outcome is not None and self.answer is not None:
            again = self._repeat(answer, self._outcome, self.answer)
            return again.result.model_copy(update={"preview": True})
        self._check_finishable()
        settings = self._settings()
        result = evaluate_task(
            self._task(), answer, self.trace, site_map=settings.site_map,
            data_checksum=settings.data_checksum,
        )  # fmt: skip
        return result.model_copy(update={"preview": True})

    def sites_answered(self, settings: RunSettings | None = None) -> dict[str, Any]:
        """Whether the task's sites answered every navigation and mutation so far (`sites_answered`,
        and `unanswered` when not) and which got a failing answer (`site_errors`): what a finish (and a
        preview) answers beside the verdict. Faults the proxy made on purpose count in neither."""
        origins = site_origins((settings or self._settings()).site_map.urls)
        events = self.trace.summaries_with_status(FAILING_STATUSES)  # the few that may count
        kept = excuse(events, [(f["method"], f["url"]) for f in self.faults_injected if f.get("failing")])
        fields = {**sites_answered_fields(kept, origins), "site_errors": site_errors_field(kept, origins)}
        return {**fields, "faults_injected": list(self.faults_injected)} if self.faults_injected else fields

    # --- the finish --------------------------------------------------------------------------------

    def finish(self, response: Any, *, interference: dict[str, Any] | None = None) -> FinishOutcome:
        """Judge `response` (the agent's final answer) on the trace, write the outputs and freeze the
        attempt, with the settings as they are now. `interference` (the replica pool's word on other
        sessions' mutations) goes into the answer and the attempt's record, never into the verdict.
        Raises `FinishRefused` (nothing changed) or `OutputsFailed` (still running).

        Finished already: the same answer gets the first outcome again (`repeated`: a client that
        retries after a lost reply gets the verdict it missed); a different answer is refused with
        `different_answer`, naming both, because the verdict judged the first one
        (docs/architecture.md, The finish)."""
        answer = FinalAnswer.read(response)  # read once for the verdict and agent_response.json
        if self.state is SessionState.FINISHED and self._outcome is not None and self.answer is not None:
            return self._repeat(answer, self._outcome, self.answer)
        self._check_finishable()
        task, settings = self._task(), self._settings()
        started = time.perf_counter()
        result = evaluate_task(
            task, answer, self.trace, site_map=settings.site_map, data_checksum=settings.data_checksum
        )
        evaluated = time.perf_counter()
        sites = self.sites_answered(settings)
        self.site_errors = sites["site_errors"]
        if interference is not None:
            result = result.model_copy(update={"interference": interference})
        if self.lease is not None and self.lease.ended_early:
            result = result.model_copy(update={"lease_ended": self.lease.ended_early})
        finished = time.time()
        outputs = None
        if settings.output_dir is not None:
            outputs = write_attempt(self, settings, answer, result, finished)
        self.stop()
        self.result, self.answer = result, answer
        if outputs:
            self._written_to = self._found = Path(outputs[RESULT_FILE]).parent
            self._earlier = outputs.get(EARLIER_ATTEMPT)
        self.state, self.finished = SessionState.FINISHED, finished
        if self.journal is not None:
            self.journal.mark_finished()
        earlier = outputs.get(EARLIER_ATTEMPT) if outputs else None
        total = time.perf_counter() - started
        self._outcome = FinishOutcome(
            result, outputs, earlier, {"evaluate": evaluated - started, "total": total}, sites
        )
        return self._outcome

    def _repeat(self, answer: FinalAnswer, first: FinishOutcome, judged: FinalAnswer) -> FinishOutcome:
        if (refused := different_answer(self.session, judged, answer)) is not None:
            raise FinishRefused("different_answer", refused)
        no_time = {"evaluate": 0.0, "total": 0.0}
        return FinishOutcome(first.result, self.outputs, None, no_time, first.sites, repeated=True)

    def _task(self) -> Task:
        if self.task is None:
            raise FinishRefused("no_task", no_task_detail(self.session))
        return self.task

    def _check_finishable(self) -> None:
        self._task()
        if self.state is SessionState.FINISHED:
            raise FinishRefused("already_finished", f"session {self.session!r} is finished; "
                                "POST /sessions to restart it")  # fmt: skip
        if not len(self.trace) and (self.lease is None or self.lease.ended_early is None):
            # The reference refuses a run without network events (an error verdict nobody can use);
            # saying so lets the harness check its proxy settings and finish again. Not once the lease
            # ended: the agent's traffic was refused then, and the finish says `lease_ended`.
            raise FinishRefused("no_events", self.nothing_captured())

    def nothing_captured(self) -> str:
        """What the proxy saw of this attempt without capturing an event, and what to do: the words of
        `no_events` and of the dashboard's session view (`runs/uncaptured.py`)."""
        return said_of(self, self._settings().site_map)

    @property
    def outputs(self) -> dict[str, str] | None:
        """Where the finished attempt's files are now, by name: where the finish wrote them, or where a
        later attempt of the task moved them (`locate_attempt`); None when none were written."""
        if self._written_to is None:
            return None
        if self._found is None or attempt_id(self._found) != self.id:
            self._found = locate_attempt(self._written_to, self.id)
        found = (
            {}
            if self._found is None
            else {  # None: removed from the output directory by someone else
                name: str(self._found / name) for name in ATTEMPT_FILES if (self._found / name).exists()
            }
        )
        if self._earlier is not None:
            found[EARLIER_ATTEMPT] = self._earlier
        return found

    # --- views -------------------------------------------------------------------------------------

    @property
    def outcome(self) -> FinishOutcome | None:
        """What its finish answered (None before it)."""
        return self._outcome

    def describe(self) -> dict[str, Any]:
        """The attempt as the session's view shows it (`runs/attempt_view.py`)."""
        return attempt_view(self)
