"""The files a finished session leaves behind (docs/architecture.md, The finish).

The run directory's names, layout, atomic writes and earlier attempts are the evaluator's
(`new_attempt`, shared with `place_run` and the offline tools); the runs side writes the files itself,
with what only a live session has: the HAR spooled while the session ran, and the attempt's record.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from webarena_live.evaluator import (
    ATTEMPT_FILE,
    RESPONSE_FILE,
    RESULT_FILE,
    TRACE_FILE,
    FinalAnswer,
    NetworkTrace,
    TaskResult,
    agent_response_text,
    new_attempt,
    task_dir,
    trace_to_har,
    write_json_atomically,
    write_text_atomically,
)
from webarena_live.runs.finish_outcome import OutputsFailed
from webarena_live.runs.har_spool import HarSpool
from webarena_live.runs.redact import redact_har

if TYPE_CHECKING:
    from webarena_live.runs.attempt import Attempt
    from webarena_live.runs.settings import RunSettings


def write_outputs(
    out_dir: Path,
    *,
    task_id: int,
    record: dict[str, Any],
    raw_response: Any,
    trace: NetworkTrace,
    result: TaskResult,
    run: str | None = None,
    redact: bool = False,
    har_spool: HarSpool | None = None,
) -> dict[str, str]:
    """Write a finished attempt's files to `OUT/[<run>/]<task_id>/` (an earlier attempt there moved
    aside first); their paths by name (`AttemptDir.written`).

    `record` is the attempt's own record (`ATTEMPT_FILE`: its id, session, times). With `redact`,
    cookies, credentials and passwords are left out of the HAR (see `runs.redact`); the result, judged
    on the full trace, is unchanged. A `har_spool` holding the session's HAR already
    (`runs.har_spool`) is renamed into place instead of serializing the trace: constant time at any
    trace length.
    """
    with new_attempt(task_dir(out_dir, task_id, run)) as target:
        write_json_atomically(target.path(ATTEMPT_FILE), record)
        write_text_atomically(target.path(RESPONSE_FILE), agent_response_text(raw_response))
        trace_path = target.path(TRACE_FILE)
        if har_spool is None or not har_spool.commit(trace_path, expected_entries=len(trace)):
            har = trace_to_har(trace)
            write_text_atomically(trace_path, json.dumps(redact_har(har) if redact else har, indent=1))
        write_json_atomically(target.path(RESULT_FILE), result.to_file_dict())
        return target.written()  # inside the hold (see `AttemptDir.written`)


def write_attempt(
    attempt: Attempt, settings: RunSettings, answer: FinalAnswer, result: TaskResult, finished: float
) -> dict[str, str]:
    """`write_outputs` for a finishing attempt: its HAR spool used when it holds every event as the
    settings want them (then discarded either way: a failed finish serializes again); `OutputsFailed`
    when the files cannot be written."""
    assert settings.output_dir is not None and attempt.task is not None
    spool, attempt.har_spool = attempt.har_spool, None
    if spool is not None and (
        not spool.usable or spool.redacted != settings.redact or spool.entries != len(attempt.trace)
    ):
        spool.discard()  # it does not hold every event as the outputs need them: serialize instead
        spool = None
    try:
        return write_outputs(
            settings.output_dir,
            task_id=attempt.task.task_id,
            record=attempt_record(attempt, finished, result.interference, attempt.site_errors),
            run=attempt.run,
            raw_response=answer,
            trace=attempt.trace,
            result=result,
            redact=settings.redact,
            har_spool=spool,
        )
    except OSError as error:
        raise OutputsFailed(f"cannot write outputs: {error}") from None
    finally:
        if spool is not None:
            spool.discard()  # nothing left after a commit; a failed finish falls back to serializing


def attempt_record(
    attempt: Attempt,
    finished: float,
    interference: dict[str, Any] | None = None,
    site_errors: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The attempt's own record, written beside its files (`ATTEMPT_FILE`): its id, session, task, run,
    times, replicas, interference, how its lease ended, the failing answers of its sites (`site_errors`)
    and the faults the proxy made on purpose (`faults_injected`, when there were any) (`attempt.json`)."""
    task_id = attempt.task.task_id if attempt.task is not None else None
    record: dict[str, Any] = {
        "attempt": attempt.id, "session": attempt.session, "task_id": task_id, "run": attempt.run,
        "started": _iso(attempt.started), "finished": _iso(finished),
    }  # fmt: skip
    if attempt.lease is not None:
        record["replicas"] = attempt.lease.replicas
    if interference is not None:
        record["interference"] = interference
    if attempt.lease is not None and attempt.lease.ended_early:
        record["lease_ended"] = attempt.lease.ended_early
        if attempt.lease.ended_detail:
            record["lease_ended_reason"] = attempt.lease.ended_detail
        record["refused_after_lease_end"] = attempt.lease.refused_after_end
    if site_errors is not None:
        record["site_errors"] = site_errors
    if attempt.faults_injected:
        record["faults_injected"] = list(attempt.faults_injected)
    return record


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds")
