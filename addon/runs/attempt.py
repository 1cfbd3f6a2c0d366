"""One live run: a session's attempt at one task, from its start to its finish.

The run owns what only an attempt has: the task, the trace it is judged on,
the spool of its `network.har` and the evaluation prepared while it runs. Its
`finish` is the whole finish — evaluate, write the outputs, mark the session
finished — in one call that knows nothing of HTTP: the control routes, the
addon and the tests call the same thing.

Everything runs on the proxy's event loop thread, like the sessions: no locks.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from webarena_live.addon.runs.har_spool import SPOOL_SUBDIR, HarSpool
from webarena_live.addon.runs.outputs import EARLIER_ATTEMPT, write_outputs
from webarena_live.evaluator import (
    NetworkTrace,
    SiteMap,
    Task,
    TaskProgress,
    TaskResult,
    WebArenaLiveError,
    evaluate_task,
    prepare_evaluation,
    task_progress,
)

PREPARE_DELAY = 0.1
"""Seconds after an event before the task's evaluators scan the new events (batched, off the flow path)."""

logger = logging.getLogger(__name__)


class FinishRefused(WebArenaLiveError):
    """The run cannot be finished now; `reason` is a stable code (`already_finished`, `no_events`)."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


class OutputsFailed(WebArenaLiveError):
    """The outputs could not be written (disk full, permissions); the run is still running."""


@dataclass(frozen=True, slots=True)
class RunSettings:
    """Where a run's outputs go and how it is judged; the same for every run of a proxy."""

    site_map: SiteMap = field(default_factory=SiteMap)
    output_dir: Path | None = None
    redact: bool = False
    """Leave cookies, credentials and passwords out of the written network.har (addon.redact)."""
    data_checksum: str | None = None
    """The dataset's checksum, carried by every result."""


@dataclass(frozen=True, slots=True)
class FinishOutcome:
    result: TaskResult
    outputs: dict[str, str] | None
    """Paths of the written files by name (None without an output directory)."""
    earlier_attempt: str | None
    """Where an earlier attempt's files were moved, when there was one."""
    timings: dict[str, float]
    """Seconds spent: `evaluate`, and `total` (evaluation plus outputs)."""


class LiveRun:
    """A session's attempt at `task` on `trace`; `finish` judges it once."""

    def __init__(
        self,
        task: Task,
        trace: NetworkTrace,
        *,
        session: str,
        run: str | None,
        settings: Callable[[], RunSettings],
        on_finished: Callable[[TaskResult, dict[str, str] | None], None],
        label: str,
        redacted_entries: bool,
    ) -> None:
        self.task = task
        self.trace = trace
        self.session = session
        self.run = run
        self._settings = settings
        """Read at each use: options reconfigured while the run goes on apply to its finish."""
        self._on_finished = on_finished
        self.result: TaskResult | None = None
        self._prepare_timer: asyncio.TimerHandle | None = None
        output_dir = settings().output_dir
        self.har_spool: HarSpool | None = None
        if output_dir is not None:
            self.har_spool = HarSpool(output_dir / SPOOL_SUBDIR, label=label, redacted=redacted_entries)

    @property
    def finished(self) -> bool:
        return self.result is not None

    # --- while it runs ---------------------------------------------------------------------------

    def spool(self) -> HarSpool | None:
        """The spool new events go to, None when there is none (or it broke)."""
        spool = self.har_spool
        return spool if spool is not None and spool.usable else None

    def added(self) -> None:
        """An event was appended to the trace: scan it soon, batched with those that follow."""
        if self._prepare_timer is not None or self.finished:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # not inside the proxy (a unit test): the finish does all the work, as offline
        self._prepare_timer = loop.call_later(PREPARE_DELAY, self.prepare_evaluation)

    def prepare_evaluation(self) -> None:
        """Let the task's network evaluators scan the events captured since they last looked,
        so the finish's own evaluation only scans what arrived after this."""
        self._prepare_timer = None
        if self.finished:
            return
        try:
            prepare_evaluation(self.task, self.trace, site_map=self._settings().site_map)
        except Exception:  # the finish evaluates again and reports whatever is wrong
            logger.debug("evaluation warm-up of session %r failed", self.session, exc_info=True)

    def stop(self) -> None:
        """Drop the spool and any pending warm-up: the run ends without a finish (restart, shutdown)."""
        if self.har_spool is not None:
            self.har_spool.discard()
            self.har_spool = None
        if self._prepare_timer is not None:
            self._prepare_timer.cancel()
            self._prepare_timer = None

    # --- what a finish would say now ---------------------------------------------------------------

    def progress(self) -> TaskProgress:
        """Each network evaluator of the task judged on the trace so far (the finish's state, kept)."""
        return task_progress(self.task, self.trace, site_map=self._settings().site_map)

    def preview(self, response: Any) -> TaskResult:
        """The result a finish with `response` would give now, marked `preview`; nothing is written or
        finished. Refused (`FinishRefused`) exactly when the finish would be."""
        self._check_finishable()
        settings = self._settings()
        result = evaluate_task(
            self.task, response, self.trace, site_map=settings.site_map, data_checksum=settings.data_checksum
        )
        return result.model_copy(update={"preview": True})

    # --- the finish --------------------------------------------------------------------------------

    def _check_finishable(self) -> None:
        if self.finished:
            raise FinishRefused("already_finished", f"session {self.session!r} is finished; "
                                "POST /sessions to restart it")  # fmt: skip
        if not len(self.trace):
            # The reference refuses a run without network events (an error verdict nobody can use);
            # saying so lets the harness check its proxy settings and finish again.
            raise FinishRefused("no_events", f"no events captured in session {self.session!r}; is the "
                                "agent's traffic using the proxy?")  # fmt: skip

    def finish(self, response: Any) -> FinishOutcome:
        """Judge `response` (the agent's final answer, parsed) on the trace, write the outputs and mark
        the session finished. Raises `FinishRefused` (nothing changed) or `OutputsFailed`."""
        self._check_finishable()
        settings = self._settings()
        started = time.perf_counter()
        result = evaluate_task(
            self.task, response, self.trace, site_map=settings.site_map, data_checksum=settings.data_checksum
        )
        evaluated = time.perf_counter()
        outputs = self._write(settings, response, result) if settings.output_dir is not None else None
        self.stop()
        self.result = result
        self._on_finished(result, outputs)
        earlier = outputs.get(EARLIER_ATTEMPT) if outputs else None
        total = time.perf_counter() - started
        return FinishOutcome(result, outputs, earlier, {"evaluate": evaluated - started, "total": total})

    def _write(self, settings: RunSettings, response: Any, result: TaskResult) -> dict[str, str]:
        assert settings.output_dir is not None
        spool, self.har_spool = self.har_spool, None
        if spool is not None and (
            not spool.usable or spool.redacted != settings.redact or spool.entries != len(self.trace)
        ):
            spool.discard()  # it does not hold every event as the outputs need them: serialize instead
            spool = None
        try:
            return write_outputs(
                settings.output_dir,
                task_id=self.task.task_id,
                run=self.run,
                raw_response=response,
                trace=self.trace,
                result=result,
                redact=settings.redact,
                har_spool=spool,
            )
        except OSError as error:
            raise OutputsFailed(f"cannot write outputs: {error}") from None
        finally:
            if spool is not None:
                spool.discard()  # nothing left after a commit; a failed finish falls back to serializing
