"""The files a finished session leaves behind (docs/architecture.md, The finish).

Names, layout, atomic writes and earlier attempts are the run directory's
(`write_run`, shared with the offline batch); this adds
what only a live session has: the HAR spooled while the session ran.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from webarena_live.addon.runs.har_spool import HarSpool
from webarena_live.addon.runs.redact import redact_har
from webarena_live.evaluator import NetworkTrace, TaskResult, trace_to_har, write_run, write_text_atomically


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
    """Write the three files of a finished attempt (`write_run`: layout, earlier attempts, order).

    With `redact`, cookies, credentials and passwords are left out of the HAR (see `runs.redact`);
    the result, judged on the full trace, is unchanged. A `har_spool` holding the session's HAR
    already (`runs.har_spool`) is renamed into place instead of serializing the trace: constant
    time at any trace length.
    """

    def write_trace(path: Path) -> None:
        if har_spool is None or not har_spool.commit(path, expected_entries=len(trace)):
            har = trace_to_har(trace)
            write_text_atomically(path, json.dumps(redact_har(har) if redact else har, indent=1))

    return write_run(
        out_dir, task_id, run=run, response=raw_response, write_trace=write_trace, result=result.to_dict()
    )
