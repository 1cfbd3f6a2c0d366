"""The files a finished session leaves behind (DESIGN §7), written atomically.

`OUT/<task_id>/agent_response.json`, `network.har` and `eval_result.json` are
the reference tooling's layout, so its `eval-tasks` judges the same run. Each
file is written to a temporary name in the same directory and renamed over
the final one, so a reader (or a crash) never sees half a file.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from webarena_live.addon.har_spool import HarSpool
from webarena_live.addon.redact import redact_har
from webarena_live.evaluator.errors import AgentResponseError
from webarena_live.evaluator.har import trace_to_har
from webarena_live.evaluator.responses import parse_response
from webarena_live.evaluator.results import TaskResult
from webarena_live.evaluator.trace import NetworkTrace

AGENT_RESPONSE_FILE = "agent_response.json"
HAR_FILE = "network.har"
RESULT_FILE = "eval_result.json"


def agent_response_text(raw_response: Any) -> str:
    """The agent's answer as the reference should read it.

    A response we can parse is written with the official field names, whatever
    names the agent used; one we cannot parse is written exactly as received,
    so the reference reaches the same (error) verdict on it.
    """
    try:
        official = parse_response(raw_response).to_official_dict()
    except AgentResponseError:
        if isinstance(raw_response, str):
            return raw_response
        return json.dumps(raw_response, indent=2, ensure_ascii=False)
    return json.dumps(official, indent=2, ensure_ascii=False)


def write_atomically(path: Path, text: str) -> None:
    """Write `text` to `path` through a temporary file in the same directory and a rename."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="\n") as file:
            file.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def write_outputs(
    out_dir: Path,
    *,
    task_id: int,
    raw_response: Any,
    trace: NetworkTrace,
    result: TaskResult,
    redact: bool = False,
    har_spool: HarSpool | None = None,
) -> dict[str, str]:
    """Write the three files of a finished run; returns their paths by file name.

    The result goes last, so a directory holding `eval_result.json` is complete.
    With `redact`, cookies, credentials and passwords are left out of the HAR
    (see `addon.redact`); the result, judged on the full trace, is unchanged.
    A `har_spool` holding the session's HAR already (`addon.har_spool`) is renamed
    into place instead of serializing the trace: constant time at any trace length.
    """
    task_dir = out_dir / str(task_id)
    task_dir.mkdir(parents=True, exist_ok=True)
    paths = {name: task_dir / name for name in (AGENT_RESPONSE_FILE, HAR_FILE, RESULT_FILE)}
    write_atomically(paths[AGENT_RESPONSE_FILE], agent_response_text(raw_response))
    # ASCII escapes keep undecodable bytes captured as lone surrogates writable.
    if har_spool is None or not har_spool.commit(paths[HAR_FILE], expected_entries=len(trace)):
        har = trace_to_har(trace)
        write_atomically(paths[HAR_FILE], json.dumps(redact_har(har) if redact else har, indent=1))
    write_atomically(paths[RESULT_FILE], json.dumps(result.to_dict(), indent=2))
    return {name: str(path) for name, path in paths.items()}
