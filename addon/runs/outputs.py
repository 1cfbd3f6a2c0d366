"""The files a finished session leaves behind (DESIGN §7).

Names, layout, atomic writes and earlier attempts are the run directory's
(`webarena_live.evaluator.run_dir`, shared with the offline batch); this adds
what only a live session has: the HAR spooled while the session ran.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from webarena_live.addon.runs.har_spool import HarSpool
from webarena_live.addon.runs.redact import redact_har
from webarena_live.evaluator import NetworkTrace, TaskResult, trace_to_har
from webarena_live.evaluator.run_dir import (
    RESPONSE_FILE,
    RESULT_FILE,
    TRACE_FILE,
    agent_response_text,
    keep_earlier_attempt,
    task_dir,
    write_json_atomically,
    write_text_atomically,
)

EARLIER_ATTEMPT = "earlier_attempt"
"""Key of the returned paths naming where an earlier attempt of the task was moved."""


def write_outputs(
    out_dir: Path,
    *,
    task_id: int,
    raw_response: Any,
    trace: NetworkTrace,
    result: TaskResult,
    run: str | None = None,
    redact: bool = False,
    har_spool: HarSpool | None = None,
) -> dict[str, str]:
    """Write the three files of a finished run; returns their paths by file name.

    They go to `OUT/<task_id>/`, or `OUT/<run>/<task_id>/` for a named run. An
    earlier attempt found there is moved aside first (`run_dir.keep_earlier_attempt`);
    its new place is returned under `EARLIER_ATTEMPT`.
    The result goes last, so a directory holding `eval_result.json` is complete.
    With `redact`, cookies, credentials and passwords are left out of the HAR
    (see `addon.redact`); the result, judged on the full trace, is unchanged.
    A `har_spool` holding the session's HAR already (`addon.har_spool`) is renamed
    into place instead of serializing the trace: constant time at any trace length.
    """
    directory = task_dir(out_dir, task_id, run)
    earlier = keep_earlier_attempt(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths = {name: directory / name for name in (RESPONSE_FILE, TRACE_FILE, RESULT_FILE)}
    write_text_atomically(paths[RESPONSE_FILE], agent_response_text(raw_response))
    # ASCII escapes keep undecodable bytes captured as lone surrogates writable.
    if har_spool is None or not har_spool.commit(paths[TRACE_FILE], expected_entries=len(trace)):
        har = trace_to_har(trace)
        write_text_atomically(paths[TRACE_FILE], json.dumps(redact_har(har) if redact else har, indent=1))
    write_json_atomically(paths[RESULT_FILE], result.to_dict())
    written = {name: str(path) for name, path in paths.items()}
    if earlier is not None:
        written[EARLIER_ATTEMPT] = str(earlier)
    return written
