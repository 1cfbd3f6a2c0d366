"""A run directory's files: one owner for what the live finish and the offline batch write.

The layout is the reference tooling's: `OUT/<task_id>/agent_response.json`,
`network.har` and `eval_result.json`. A session started with a run name writes
`OUT/<run>/<task_id>/…` instead, each run directory in that same layout, so
`webarena-verified eval-tasks --output-dir OUT/<run>` reads it unchanged.

Nothing is overwritten silently: a finish for a task whose folder already holds
an attempt moves that attempt to `OUT/.attempts/<task_id>/<n>/` first (a dot
folder, which the reference's tooling skips, like the journal). Every file is
written to a temporary name in its directory and renamed into place, so a
reader or a crash never sees half a file, with the same permissions (0644)
whoever writes it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

from webarena_live.evaluator.errors import AgentResponseError, OutputDirError
from webarena_live.evaluator.responses import FinalAnswer, parse_response

RESPONSE_FILE = "agent_response.json"
TRACE_FILE = "network.har"
RESULT_FILE = "eval_result.json"
ATTEMPT_FILE = "attempt.json"
"""This project's record of the attempt beside the reference's three files (its id, session, times),
which the reference's tooling does not read: how a session finds its files after a later attempt of
the task moved them aside."""
ATTEMPT_FILES = (ATTEMPT_FILE, RESPONSE_FILE, TRACE_FILE, RESULT_FILE)
"""An attempt's files in the order they are written: the result last, so its presence means complete."""
SUMMARY_FILE = "eval_results.json"
RUN_CONFIG_FILE = "run_config.json"
"""A per-run site map the reference uses when no `--config` is given (runs may come from different hosts)."""
EARLIER_ATTEMPT = "earlier_attempt"
"""Key of `AttemptDir.written()` naming where an earlier attempt of the task was moved."""
POOL_FILE = ".pool.json"
"""A run directory's replica pool counters (resets done, skipped, failed, seconds), kept by the proxy for
the run report; a dot file, which the reference's tooling skips."""
ATTEMPTS_DIR = ".attempts"
"""Earlier attempts of a task, moved aside by a later finish: `OUT/.attempts/<task_id>/<n>/`."""

RUN_NAME = re.compile(r"^(?!\d+$)[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
"""A run name is one path segment that cannot be mistaken for a task id or a hidden folder."""

RUN_FILE_MODE = 0o644
"""Every file of a run directory, whoever writes it (the proxy, `evaluate`, a spool renamed into place)."""


def run_name_problem(name: str) -> str | None:
    """Why `name` cannot name a run directory, or None."""
    if RUN_NAME.match(name):
        return None
    return (
        f"run name {name!r} must be 1-100 letters, digits, '.', '_' or '-', start with a letter or digit, "
        "and not be a number (numbers are task folders)"
    )


def write_text_atomically(path: Path, text: str) -> None:
    """Write `text` to `path` through a temporary file in the same directory and a rename."""
    write_bytes_atomically(path, text.encode("utf-8"))


def write_bytes_atomically(path: Path, content: bytes) -> None:
    """Write `content` to `path` through a temporary file in the same directory and a rename."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(content)
        os.chmod(temporary, RUN_FILE_MODE)  # mkstemp creates 0600; run files are shared like any output
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def write_json_atomically(path: Path, document: object) -> None:
    """Write a JSON document (indented, UTF-8) atomically."""
    # ASCII escapes: a captured value may hold lone surrogates (undecodable bytes), which UTF-8 cannot.
    write_text_atomically(path, json.dumps(document, indent=2) + "\n")


def agent_response_text(raw_response: Any) -> str:
    """The agent's answer as the reference should read it.

    A response we can parse is written with the official field names, whatever
    names the agent used; one we cannot parse is written exactly as received,
    so the reference reaches the same (error) verdict on it.
    """
    answer = FinalAnswer.read(raw_response)
    try:
        official = parse_response(answer).to_official_dict()
    except AgentResponseError:
        if isinstance(answer.raw, str):
            return answer.raw
        return json.dumps(answer.raw, indent=2, ensure_ascii=False)
    return json.dumps(official, indent=2, ensure_ascii=False)


@dataclasses.dataclass(frozen=True)
class AttemptDir:
    """The task folder an attempt's files go to, opened by `new_attempt`, and where the attempt it
    held before went (`.attempts/<task_id>/<n>/`), if any."""

    directory: Path
    earlier: Path | None

    def path(self, name: str) -> Path:
        return self.directory / name

    def written(self) -> dict[str, str]:
        """The paths of the attempt's files there, by name, with `EARLIER_ATTEMPT` when one was moved.
        Called while `new_attempt` holds the folder: after, another process's finish of the same task
        may already have moved them aside, and the files would be missing from the answer."""
        written = {
            name: str(self.directory / name) for name in ATTEMPT_FILES if (self.directory / name).exists()
        }
        if self.earlier is not None:
            written[EARLIER_ATTEMPT] = str(self.earlier)
        return written


@contextlib.contextmanager
def new_attempt(directory: Path) -> Iterator[AttemptDir]:
    """Hold the task folder `directory` (`OUT/[<run>/]<task_id>`) for a new attempt's files: an earlier
    attempt there is moved aside first (`keep_earlier_attempt`). The caller writes the files, each
    atomically, `RESULT_FILE` last, so a folder holding `eval_result.json` is complete."""
    with holding_run_dir(directory):
        earlier = keep_earlier_attempt(directory)
        directory.mkdir(parents=True, exist_ok=True)
        yield AttemptDir(directory, earlier)


def locate_attempt(directory: Path, attempt: str) -> Path | None:
    """Where the files of attempt `attempt` (its `ATTEMPT_FILE`'s id), written to the task folder
    `directory`, are now: there, or moved aside to `.attempts/<task_id>/<n>/` by a later attempt."""
    if attempt_id(directory) == attempt:
        return directory
    kept = directory.parent / ATTEMPTS_DIR / directory.name
    if kept.is_dir():
        for candidate in sorted(kept.iterdir(), key=lambda p: (len(p.name), p.name), reverse=True):
            if attempt_id(candidate) == attempt:
                return candidate
    return None


def attempt_id(directory: Path) -> str | None:
    """The attempt id in `directory`'s `ATTEMPT_FILE`, or None (no file, or not ours)."""
    found = attempt_record(directory).get("attempt")
    return found if isinstance(found, str) else None


def attempt_record(directory: Path) -> dict[str, Any]:
    """`directory`'s `ATTEMPT_FILE` (its id, session, times), or {} (no file, or not ours)."""
    try:
        record = json.loads((directory / ATTEMPT_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def task_attempts(run: Path, task_id: int | str) -> list[Path]:
    """Every attempt of a task in the run directory `run`, oldest first: those moved aside
    (`.attempts/<task_id>/<n>/`, by `n`), then the task folder `<task_id>/` (the last one, which the
    reference's tooling judges), when it holds one."""
    kept = run / ATTEMPTS_DIR / str(task_id)
    earlier = sorted(
        (p for p in kept.iterdir() if p.name.isdigit() and p.is_dir()), key=lambda p: int(p.name)
    ) if kept.is_dir() else []  # fmt: skip
    last = run / str(task_id)
    holds = last.is_dir() and any((last / name).exists() for name in ATTEMPT_FILES)
    return [*earlier, last] if holds else earlier


@contextlib.contextmanager
def holding_run_dir(directory: Path) -> Iterator[None]:
    """Hold the run directory holding the task folder `directory` (`OUT` or `OUT/<run>`) while its
    files are moved aside and written, or read: two processes finishing the same task there (the
    workers of `serve --workers`) take turns instead of moving a folder the other is writing in, and a
    reader sees whole attempts where it looked. An advisory lock on the folder itself, so nothing is
    added to the run directory."""
    directory.parent.mkdir(parents=True, exist_ok=True)
    if fcntl is None:  # not POSIX: one process writes a run directory at a time
        yield
        return
    handle = os.open(directory.parent, os.O_RDONLY)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
    finally:
        os.close(handle)  # releases the lock


def place_run(directory: Path, contents: Mapping[str, bytes]) -> dict[str, str]:
    """Write an attempt's files, already made elsewhere, into `directory` (`OUT/[<run>/]<task_id>`), by
    file name: an earlier attempt there is moved aside first and the result goes last. Returns their
    paths, with `EARLIER_ATTEMPT` when one was moved."""
    with new_attempt(directory) as target:
        for name in ATTEMPT_FILES:
            if name in contents:
                write_bytes_atomically(target.path(name), contents[name])
        return target.written()  # inside the hold: once released, another writer may move them aside


def prepare_output_dir(path: str | Path) -> Path:
    """`path` as a writable directory, created if missing; OutputDirError (one line) when it cannot be."""
    directory = Path(path).expanduser()
    if directory.exists() and not directory.is_dir():
        raise OutputDirError(f"output directory {directory} is not a directory")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as error:
        reason = error.strerror or str(error)
        raise OutputDirError(f"output directory {directory} cannot be used: {reason}") from None
    return directory.resolve()


def task_dir(out_dir: Path, task_id: int, run: str | None = None) -> Path:
    """Where a task's files go: `OUT/<task_id>`, or `OUT/<run>/<task_id>` for a named run."""
    return (out_dir / run if run else out_dir) / str(task_id)


def keep_earlier_attempt(directory: Path) -> Path | None:
    """Move an earlier attempt in `directory` to `.attempts/<task_id>/<n>/` beside it; where it went.

    Returns None when the directory holds no attempt (no file of the four).
    """
    if not directory.is_dir() or not any((directory / name).exists() for name in ATTEMPT_FILES):
        return None
    while True:  # another writer may take a number between the scan and the rename
        target = aside_dir(directory)
        try:
            directory.rename(target)
        except OSError:
            if not target.exists():
                raise
            continue
        return target


def aside_dir(directory: Path) -> Path:
    """The next free place for an earlier attempt of the task folder `directory`:
    `.attempts/<task_id>/<n>/` beside it (its parent is created; the folder itself is not)."""
    kept = directory.parent / ATTEMPTS_DIR / directory.name
    kept.mkdir(parents=True, exist_ok=True)
    return kept / str(1 + max((int(p.name) for p in kept.iterdir() if p.name.isdigit()), default=0))


def discover_runs(output_dir: Path) -> tuple[list[int], list[int]]:
    """Task ids of the complete runs under `output_dir`, and of the incomplete ones.

    Like the reference, a run is a directory named by an integer holding both
    the response and the trace file; other entries are ignored.
    """
    complete: list[int] = []
    incomplete: list[int] = []
    for entry in output_dir.iterdir():
        if not (entry.name.isdigit() and entry.is_dir()):
            continue
        has_files = (entry / RESPONSE_FILE).is_file() and (entry / TRACE_FILE).exists()
        (complete if has_files else incomplete).append(int(entry.name))
    return sorted(complete), sorted(incomplete)


def named_runs(output_dir: Path) -> list[Path]:
    """The named run directories under `output_dir`: `OUT/<run>/` folders that hold task folders."""
    return sorted(
        entry
        for entry in output_dir.iterdir()
        if entry.is_dir()
        and run_name_problem(entry.name) is None
        and any(child.name.isdigit() and child.is_dir() for child in entry.iterdir())
    )
