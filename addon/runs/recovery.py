"""Pick a session up again from its journal after the proxy died.

Every captured event is appended to the session run's journal the moment it
completes (`runs/journal.py.Journal`), so a killed proxy loses nothing already
captured. After a restart, `POST /sessions {"task_id": N, "session": S,
"resume_journal": true}` finds the newest journal of session S for task N
and starts the session again with those events, so the agent can carry on
and finish. The journal is also a trace file for offline evaluation
(`evaluator.har.load_trace(path)`).
"""

from __future__ import annotations

import re
from collections.abc import Set as AbstractSet
from datetime import UTC, datetime
from pathlib import Path

from webarena_live.evaluator import NetworkTrace, WebArenaLiveError, load_trace
from webarena_live.runs.journal import FINISHED_INDEX, journal_filename

# What `journal_filename` puts after "<session>-<task>-": a UTC time and the suffix.
_TIME_AND_SUFFIX = re.compile(r"^\d{8}T\d{6}\.\d{6}\.jsonl$")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class JournalNotFoundError(WebArenaLiveError):
    """No journal of the named session and task exists in the journal directory."""


def journal_prefix(session: str, task_id: int | None) -> str:
    """The file name start `journal_filename` gives every run of `session` on `task_id`."""
    # Derived from the real naming function, so the two cannot drift apart.
    sample = journal_filename(session, task_id, _EPOCH)
    return sample[: -len("19700101T000000.000000.jsonl")]


def find_journal(journal_dir: Path | None, session: str, task_id: int | None) -> Path:
    """The newest journal of `session` on `task_id` (None: its idle run); raises JournalNotFoundError."""
    if journal_dir is None or not journal_dir.is_dir():
        raise JournalNotFoundError(f"no journal directory ({journal_dir}) to resume session {session!r} from")
    prefix = journal_prefix(session, task_id)
    found = [
        path
        for path in journal_dir.iterdir()
        if path.name.startswith(prefix) and _TIME_AND_SUFFIX.match(path.name[len(prefix) :])
    ]
    if not found:
        raise JournalNotFoundError(f"no journal of session {session!r} for task {task_id} in {journal_dir}")
    # The time in the name sorts as text; it is when the run started.
    return max(found, key=lambda path: path.name)


def journal_started(path: Path) -> datetime | None:
    """When the run journaled in `path` started: the time in its name (`journal_filename`), or None."""
    stamp = path.name.removesuffix(".jsonl")[-len("19700101T000000.000000") :]
    try:
        return datetime.strptime(stamp, "%Y%m%dT%H%M%S.%f").replace(tzinfo=UTC)
    except ValueError:
        return None


def read_journal(path: Path) -> NetworkTrace:
    """The events of a journal (a last line cut short by a crash is left out)."""
    return load_trace(path)


RESUMABLE_LISTED = 50
"""At most this many resumable runs are listed (newest first): the journal directory outlives runs."""


_Scan = tuple[dict[tuple[str, int], Path], frozenset[str]]
_scans: dict[Path, tuple[tuple[int, ...], _Scan]] = {}
"""The last scan of each journal directory, with the stamps that would change it."""
_event_counts: dict[Path, tuple[int, int]] = {}
"""Lines in a journal, by path, with the size they were counted at."""


def _scan(journal_dir: Path) -> _Scan:
    """The newest journal of each (session, task) and the finished journals' names, scanned again only
    when a journal was added or removed (the directory changes) or a run finished (the index grows):
    `GET /sessions` asks on every dashboard refresh, and the directory outlives runs."""
    index = journal_dir / FINISHED_INDEX
    try:
        index_stat = index.stat()
        index_stamp = (index_stat.st_mtime_ns, index_stat.st_size)
    except FileNotFoundError:
        index_stamp = (0, 0)
    stamp = (journal_dir.stat().st_mtime_ns, *index_stamp)
    cached = _scans.get(journal_dir)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    finished = frozenset(index.read_text(encoding="utf-8").split()) if index_stamp[1] else frozenset()
    newest: dict[tuple[str, int], Path] = {}
    for path in journal_dir.glob("*.jsonl"):
        parts = path.name.rsplit("-", 2)
        if len(parts) != 3 or not parts[1].isdigit() or not _TIME_AND_SUFFIX.match(parts[2]):
            continue  # an idle run (no task to resume) or a file that is not a journal
        key = (parts[0], int(parts[1]))
        if key not in newest or path.name > newest[key].name:
            newest[key] = path
    _scans[journal_dir] = (stamp, (newest, finished))
    return newest, finished


def _events_in(path: Path, size: int) -> int:
    counted = _event_counts.get(path)
    if counted is None or counted[0] != size:
        if len(_event_counts) > 4 * RESUMABLE_LISTED:
            _event_counts.clear()
        counted = _event_counts[path] = (size, path.read_bytes().count(b"\n"))
    return counted[1]


def resumable_runs(
    journal_dir: Path | None, *, skip: AbstractSet[Path] = frozenset()
) -> list[dict[str, object]]:
    """Unfinished task runs found in `journal_dir`: the newest journal of each session and task.

    Journals in `skip` (the live sessions' own) are left out. Each entry says
    how to resume it (`POST /sessions` with `resume_journal`).
    """
    if journal_dir is None or not journal_dir.is_dir():
        return []
    newest, finished = _scan(journal_dir)
    runs: list[dict[str, object]] = []
    by_start = sorted(newest.items(), key=lambda item: item[1].name.rsplit("-", 1)[1], reverse=True)
    for (session, task_id), path in by_start:
        if path.name in finished or path in skip:
            continue
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            continue  # removed since the scan
        if not size:
            continue
        runs.append(
            {
                "session": session,
                "state": "resumable",
                "task_id": task_id,
                "events": _events_in(path, size),
                "journal": str(path),
                "resume": {"task_id": task_id, "session": session, "resume_journal": True},
            }
        )
        if len(runs) == RESUMABLE_LISTED:
            break
    return runs
