"""Offline evaluation of a run directory, the layout the reference's `eval-tasks` reads.

A run directory holds one sub-directory per task, named by the task id, with
the agent's final answer (`agent_response.json`) and the network trace
(`network.har`). Every run found is evaluated in this process with the
dataset loaded once, and its verdict written next to it (`eval_result.json`).
A run that cannot be read becomes an `error` verdict that names the file and
the problem; the batch always goes on.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from webarena_live.evaluator import __version__
from webarena_live.evaluator.errors import RunInputError, WebArenaLiveError
from webarena_live.evaluator.evaluate import evaluate_task, task_fields
from webarena_live.evaluator.har import load_trace
from webarena_live.evaluator.results import REFERENCE_VERSION, EvalStatus, TaskResult
from webarena_live.evaluator.run_dir import (
    ATTEMPTS_DIR,
    RESPONSE_FILE,
    RESULT_FILE,
    RUN_CONFIG_FILE,
    SUMMARY_FILE,
    TRACE_FILE,
    discover_runs,
    task_attempts,
    write_json_atomically,
)
from webarena_live.evaluator.sites import SiteMap
from webarena_live.evaluator.tasks import TaskSet


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class SiteSummary(_Frozen):
    """Counts for one site key (sites joined by '-', sorted), as the reference's summary lists them."""

    total: int = 0
    success_count: int = 0
    failure_count: int = 0
    error_count: int = 0
    failed_or_error_count: int = 0
    success_task_ids: tuple[int, ...] = ()
    failed_task_ids: tuple[int, ...] = ()
    error_task_ids: tuple[int, ...] = ()

    @property
    def success_rate(self) -> float:
        return self.success_count / self.total if self.total else 0.0


class BatchSummary(_Frozen):
    overall: SiteSummary
    per_site: dict[str, SiteSummary]


class BatchReport(_Frozen):
    """What one batch did: a verdict per evaluated run, and the directories it skipped."""

    output_dir: Path
    results: tuple[TaskResult, ...]
    skipped_task_ids: tuple[int, ...] = ()
    """Task directories lacking the response or the trace file (not evaluated, like the reference)."""
    data_checksum: str | None = None

    @property
    def summary(self) -> BatchSummary:
        return summarize(self.results)

    @property
    def error_task_ids(self) -> tuple[int, ...]:
        return tuple(r.task_id for r in self.results if r.status == EvalStatus.ERROR)


def summarize(results: Iterable[TaskResult]) -> BatchSummary:
    """Overall and per-site counts of successes, failures and errors."""
    buckets: dict[str, dict[EvalStatus, list[int]]] = {}
    for result in results:
        key = "-".join(sorted(result.sites))
        buckets.setdefault(key, {status: [] for status in EvalStatus})[result.status].append(result.task_id)

    def build(by_status: dict[EvalStatus, list[int]]) -> SiteSummary:
        success, failure, error = (
            by_status[s] for s in (EvalStatus.SUCCESS, EvalStatus.FAILURE, EvalStatus.ERROR)
        )
        return SiteSummary(
            total=len(success) + len(failure) + len(error),
            success_count=len(success),
            failure_count=len(failure),
            error_count=len(error),
            failed_or_error_count=len(failure) + len(error),
            success_task_ids=tuple(success),
            failed_task_ids=tuple(failure),
            error_task_ids=tuple(error),
        )

    merged: dict[EvalStatus, list[int]] = {status: [] for status in EvalStatus}
    for by_status in buckets.values():
        for status, ids in by_status.items():
            merged[status].extend(ids)
    return BatchSummary(overall=build(merged), per_site={key: build(b) for key, b in sorted(buckets.items())})


def read_response(path: Path) -> str:
    """The agent's final answer as text (the response evaluator parses it, as the reference does)."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise RunInputError(f"{path}: the agent response is not UTF-8 text ({error.reason})") from None
    except OSError as error:
        raise RunInputError(f"{path}: cannot read the agent response: {error.strerror or error}") from None


def _naming(path: Path, error: Exception) -> str:
    message = str(error)
    return message if str(path) in message or path.name in message else f"{path}: {message}"


def _site_map_for_run(run_dir: Path, site_map: SiteMap, use_run_configs: bool) -> SiteMap:
    run_config = run_dir / RUN_CONFIG_FILE
    if not use_run_configs or not run_config.is_file():
        return site_map
    try:
        return SiteMap.load(run_config, strict=False)  # read as leniently as the reference reads it
    except WebArenaLiveError as error:
        raise RunInputError(_naming(run_config, error)) from None


def evaluate_run(
    run_dir: Path,
    task_id: int,
    tasks: TaskSet,
    site_map: SiteMap,
    *,
    data_checksum: str | None = None,
    use_run_configs: bool = False,
) -> TaskResult:
    """Evaluate one run directory; never raises for bad input."""
    if task_id not in tasks:
        return TaskResult.from_error(
            task_id=task_id,
            message=f"{run_dir}: task {task_id} is not in the dataset {tasks.source}",
            webarena_verified_data_checksum=data_checksum,
        )
    task = tasks[task_id]
    try:
        if not run_dir.is_dir():
            raise RunInputError(f"{run_dir}: no such run directory")
        run_site_map = _site_map_for_run(run_dir, site_map, use_run_configs)
        response = read_response(run_dir / RESPONSE_FILE)
        trace_path = run_dir / TRACE_FILE
        try:
            trace = load_trace(trace_path)
        except WebArenaLiveError as error:
            raise RunInputError(_naming(trace_path, error)) from None
        except OSError as error:
            raise RunInputError(f"{trace_path}: cannot read the trace: {error.strerror or error}") from None
        except Exception as error:  # a reader bug must not stop the batch; the run scores as an error
            raise RunInputError(
                f"{trace_path}: cannot read the trace: {type(error).__name__}: {error}"
            ) from None
    except RunInputError as error:
        return TaskResult.from_error(
            message=str(error), webarena_verified_data_checksum=data_checksum, **task_fields(task)
        )
    return evaluate_task(task, response, trace, site_map=run_site_map, data_checksum=data_checksum)


def summary_document(report: BatchReport, timestamp: str) -> dict[str, object]:
    """The batch-level `eval_results.json`: the summary without the per-task verdicts."""
    return {
        "timestamp": timestamp,
        "webarena_verified_version": REFERENCE_VERSION,
        "webarena_live_version": __version__,
        **({"webarena_verified_data_checksum": report.data_checksum} if report.data_checksum else {}),
        "summary": report.summary.model_dump(mode="json"),
    }


def evaluate_directory(
    out_dir: str | Path,
    tasks: TaskSet,
    site_map: SiteMap,
    *,
    task_ids: Iterable[int] | None = None,
    on_result: Callable[[TaskResult], None] | None = None,
    use_run_configs: bool = False,
    write_summary: bool | None = None,
) -> BatchReport:
    """Evaluate every run under `out_dir` (or only `task_ids`), writing each verdict next to its run.

    `on_result` is called after each verdict is written (progress display).
    `use_run_configs` makes a run's own `run_config.json` override `site_map`,
    as the reference does when no config is given. The batch summary file is
    written for full batches only (`write_summary` defaults to "no task ids").
    """
    root = Path(out_dir)
    if not root.is_dir():
        raise RunInputError(f"{root}: output directory does not exist")
    skipped: list[int] = []
    if task_ids is None:
        selected, skipped = discover_runs(root)
    else:
        selected = list(dict.fromkeys(task_ids))
    checksum = tasks.checksum
    results: list[TaskResult] = []
    for task_id in selected:
        run_dir = root / str(task_id)
        try:
            result = evaluate_run(
                run_dir, task_id, tasks, site_map, data_checksum=checksum, use_run_configs=use_run_configs
            )
        except Exception as error:  # a bug in one run's evaluation must not cost the rest of the batch
            result = TaskResult.from_error(
                task_id=task_id,
                message=f"{run_dir}: evaluation failed: {type(error).__name__}: {error}",
                webarena_verified_data_checksum=checksum,
            )
        if run_dir.is_dir():
            write_json_atomically(run_dir / RESULT_FILE, result.to_dict())
        results.append(result)
        if on_result is not None:
            on_result(result)
    report = BatchReport(
        output_dir=root, results=tuple(results), skipped_task_ids=tuple(skipped), data_checksum=checksum
    )
    if write_summary if write_summary is not None else task_ids is None:
        stamp = datetime.datetime.now(datetime.UTC).isoformat()
        write_json_atomically(root / SUMMARY_FILE, summary_document(report, stamp))
    return report


def evaluate_earlier_attempts(
    out_dir: str | Path,
    tasks: TaskSet,
    site_map: SiteMap,
    *,
    task_ids: Iterable[int] | None = None,
    use_run_configs: bool = False,
) -> list[tuple[Path, TaskResult]]:
    """Evaluate the earlier attempts of each task kept in `out_dir/.attempts/<task_id>/<n>/` (or only of
    `task_ids`), writing each verdict next to its files: every attempt counts in `report`, and the
    reference's tooling, which judges the task folders only, never reads these. Returns each folder
    judged with its verdict, oldest first per task."""
    root = Path(out_dir)
    kept = root / ATTEMPTS_DIR
    if not kept.is_dir():
        return []
    found = sorted(int(entry.name) for entry in kept.iterdir() if entry.name.isdigit() and entry.is_dir())
    wanted = set(task_ids) if task_ids is not None else None
    judged: list[tuple[Path, TaskResult]] = []
    for task_id in found:
        if wanted is not None and task_id not in wanted:
            continue
        for folder in task_attempts(root, task_id):
            if folder == root / str(task_id) or not (folder / RESPONSE_FILE).is_file():
                continue  # the task folder is the batch's; a folder without an answer is no attempt to judge
            try:
                result = evaluate_run(
                    folder,
                    task_id,
                    tasks,
                    site_map,
                    data_checksum=tasks.checksum,
                    use_run_configs=use_run_configs,
                )
            except Exception as error:  # as in `evaluate_directory`: one bad run costs nothing else
                result = TaskResult.from_error(
                    task_id=task_id, message=f"{folder}: evaluation failed: {type(error).__name__}: {error}",
                    webarena_verified_data_checksum=tasks.checksum,
                )  # fmt: skip
            write_json_atomically(folder / RESULT_FILE, result.to_dict())
            judged.append((folder, result))
    return judged
