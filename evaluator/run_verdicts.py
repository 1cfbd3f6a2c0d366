"""The verdicts of a run directory as a report reads them: one per attempt, with why it failed.

Each attempt folder (`OUT/<task_id>/`, or an earlier attempt moved to `OUT/.attempts/<task_id>/<n>/`)
holds the reference's `eval_result.json`, and ours beside it `attempt.json` (its id, session and
times). A `Verdict` keeps what the figures group by (sites, action, template), whether the
environment caused a non-success (see `evaluator/run_report.py`), and each failing check with its
reason — the assertion's own messages, e.g. `Expected [39.95], got [89.0]`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from webarena_live.evaluator.errors import WebArenaLiveError
from webarena_live.evaluator.run_dir import (
    ATTEMPTS_DIR,
    RESPONSE_FILE,
    RESULT_FILE,
    TRACE_FILE,
    attempt_record,
)
from webarena_live.evaluator.tasks import TaskSet

_UNANSWERED = re.compile(rb'"status"\s*:\s*0\s*[,}]')
"""A HAR response with status 0: the request never got an answer from the site."""


class ReportError(WebArenaLiveError):
    """The directory cannot be reported (not a run directory, or one holding named runs only)."""

    def __init__(self, message: str, *, named_runs: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.named_runs = named_runs
        """The named runs the directory holds, when that is why it cannot be reported itself."""


@dataclass(frozen=True)
class Failure:
    """A check an attempt failed, and why."""

    check: str
    """`Evaluator: assertion`, `Evaluator` when no assertion is named, or `evaluation error`."""
    reason: str = ""
    """The assertion's messages (or the evaluator's error), joined; empty when the result says none."""


@dataclass(frozen=True)
class Verdict:
    """One judged attempt of a task, as the report reads it."""

    task_id: int
    status: str
    sites: tuple[str, ...]
    template: int
    action: str
    environment: bool
    """A non-success the environment caused (see `evaluator/run_report.py`)."""
    failing: tuple[Failure, ...] = ()
    folder: str = ""
    """Where its files are, relative to the run directory: `<task_id>` or `.attempts/<task_id>/<n>`."""
    attempt: dict[str, Any] | None = None
    """Its `attempt.json` (id, session, started, finished), when the proxy wrote one."""

    @property
    def exposed(self) -> bool:
        """Another session changed a site copy this attempt used while it ran (its `attempt.json`'s
        interference): the verdict stands, but someone else's change could have decided it."""
        interference = (self.attempt or {}).get("interference")
        return isinstance(interference, dict) and interference.get("exposed") is True

    @property
    def lease_ended(self) -> str | None:
        """Why the attempt's lease of its site copies ended before its finish (`timeout`, `abandoned`,
        `lost`: its `attempt.json`), None when it held to the end: the verdict judges what was captured
        while it held."""
        ended = (self.attempt or {}).get("lease_ended")
        return ended if isinstance(ended, str) else None


def _messages(entry: Mapping[str, Any]) -> str:
    messages = [str(m).rstrip(".") for m in entry.get("assertion_msgs") or () if str(m).strip()]
    if entry.get("error_msg"):
        messages.append(str(entry["error_msg"]).rstrip("."))
    return "; ".join(messages)


def failures(result: Mapping[str, Any]) -> tuple[Failure, ...]:
    """The failing checks of an `eval_result.json` document, each with its reason."""
    found = []
    if result.get("error_msg"):
        found.append(Failure("evaluation error", str(result["error_msg"])))
    for evaluator in result.get("evaluators_results") or ():
        if evaluator.get("status") == "success":
            continue
        name = str(evaluator.get("evaluator_name", "evaluator"))
        failed = [a for a in evaluator.get("assertions") or () if a.get("status") != "success"]
        found += [
            Failure(f"{name}: {a.get('assertion_name', 'assertion')}", _messages(a)) for a in failed
        ] or [Failure(name, _messages(evaluator))]
    return tuple(found)


def _environment(task_dir: Path, status: str) -> bool:
    if status == "success":
        return False
    try:
        answer = json.loads((task_dir / RESPONSE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        answer = None
    if isinstance(answer, dict) and str(answer.get("status", "")).upper() == "UNKNOWN_ERROR":
        return True
    try:
        return _UNANSWERED.search((task_dir / TRACE_FILE).read_bytes()) is not None
    except OSError:
        return False


def _place(folder: Path) -> tuple[str, str]:
    """(task id as the folder says it, the folder relative to its run directory)."""
    if folder.parent.parent.name == ATTEMPTS_DIR:
        return folder.parent.name, f"{ATTEMPTS_DIR}/{folder.parent.name}/{folder.name}"
    return folder.name, folder.name


def read_verdict(folder: Path, tasks: TaskSet | None) -> Verdict | None:
    """The verdict in `folder/eval_result.json` (a task folder or an earlier attempt's), or None."""
    try:
        result = json.loads((folder / RESULT_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:
        raise ReportError(f"{folder / RESULT_FILE}: unreadable verdict ({error})") from None
    named, relative = _place(folder)
    task_id = int(result.get("task_id", named))
    task = tasks[task_id] if tasks is not None and task_id in tasks else None
    status = str(result.get("status", "error")).lower()
    return Verdict(
        task_id=task_id,
        status=status,
        sites=tuple(str(site) for site in (task.sites if task else result.get("sites") or ("unknown",))),
        template=task.intent_template_id if task else int(result.get("intent_template_id", -1)),
        action=task.task_type.value.lower() if task else "unknown",
        environment=_environment(folder, status),
        failing=failures(result),
        folder=relative,
        attempt=attempt_record(folder) or None,
    )


class VerdictCache:
    """`read_verdict` that reads a folder again only when its `eval_result.json` changed: for a
    report asked after every finish (the dashboard's run view)."""

    def __init__(self) -> None:
        self._known: dict[Path, tuple[tuple[int, int], Verdict | None]] = {}

    def read(self, folder: Path, tasks: TaskSet | None) -> Verdict | None:
        try:
            stat = (folder / RESULT_FILE).stat()
        except FileNotFoundError:
            return None
        stamp = (stat.st_mtime_ns, stat.st_size)
        known = self._known.get(folder)
        if known is not None and known[0] == stamp:
            return known[1]
        verdict = read_verdict(folder, tasks)
        self._known[folder] = (stamp, verdict)
        return verdict


VerdictReader = Callable[[Path, "TaskSet | None"], "Verdict | None"]
