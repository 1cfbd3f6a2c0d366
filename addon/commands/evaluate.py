"""`webarena-live evaluate`: score a directory of recorded runs offline.

Same contract as the reference's `eval-tasks`: every `DIR/<task_id>/` holding
`agent_response.json` and `network.har` gets a `DIR/<task_id>/eval_result.json`,
and a per-site summary is printed. The earlier attempts of a task, kept in
`DIR/.attempts/<task_id>/<n>/`, are judged too (their count is printed apart; the
summary, like the reference's, is the task folders'). The dataset is chosen as the reference
chooses it: `--tasks`, else the config's `test_data_file`, else the official
dataset when the reference package is installed; a run of the embedded demo tasks
(what `serve` loads without `--tasks`) is judged against them. The exit status is 0 whenever
the batch ran, whatever the verdicts; it is 2, with nothing written, when the
dataset, the site map or the directory cannot be used, or when a run's task is
not in the dataset (judging it would only overwrite its verdict with an error).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from webarena_live.evaluator import (
    DEMO_DATASET,
    OFFICIAL_DATASET,
    SUMMARY_FILE,
    BatchReport,
    SiteMap,
    TaskResult,
    TaskSet,
    WebArenaLiveError,
    discover_runs,
    evaluate_directory,
    evaluate_earlier_attempts,
    load_tasks,
    named_runs,
    official_dataset_installed,
    read_config_file,
)
from webarena_live.sites import split_config

PROGRESS_THRESHOLD = 20
"""Batches with at least this many runs show a progress bar."""


def summary_table(report: BatchReport) -> Table:
    """Per-site counts, then the overall line, like the reference's summary."""
    summary = report.summary
    table = Table(title=f"Evaluation summary: {report.output_dir}")
    table.add_column("sites")
    for name in ("total", "success", "failure", "error", "success rate"):
        table.add_column(name, justify="right")
    rows = [*summary.per_site.items(), ("overall", summary.overall)]
    for index, (site, counts) in enumerate(rows):
        table.add_row(
            site or "(unknown task)",
            str(counts.total),
            str(counts.success_count),
            str(counts.failure_count),
            str(counts.error_count),
            f"{counts.success_rate:.1%}",
            end_section=index == len(rows) - 2,
        )
    return table


SHOWN_IDS = 20
"""Task ids printed per list; the rest are counted (`webarena-live report` groups them by check)."""


def id_list(ids: list[int]) -> str:
    """The first `SHOWN_IDS` ids, then how many more."""
    shown = ", ".join(str(i) for i in ids[:SHOWN_IDS])
    return shown + (f" … and {len(ids) - SHOWN_IDS} more" if len(ids) > SHOWN_IDS else "")


def _print_problems(console: Console, report: BatchReport) -> None:
    failed = [r.task_id for r in report.results if r.status == "failure"]
    if failed:
        console.print(f"[bold]failed ({len(failed)}):[/] {id_list(failed)}")
        console.print(f"which checks fail, by site and template: webarena-live report {report.output_dir}")
    errors = [r for r in report.results if r.status == "error"]
    if errors:
        console.print(f"[bold red]{len(errors)} task(s) could not be evaluated:[/]")
        for result in errors:
            console.print(
                f"  task {result.task_id}: {_error_text(result)}",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
    if report.skipped_task_ids:
        ids = id_list(list(report.skipped_task_ids))
        console.print(f"[yellow]skipped (agent_response.json or network.har missing):[/] {ids}")


def _error_text(result: TaskResult) -> str:
    if result.error_msg:
        return result.error_msg
    return "; ".join(r.error_msg or "" for r in result.evaluators_results if r.error_msg) or "error"


def dataset_source(
    tasks: str | None,
    config: str | None,
    config_data: Any = None,
    *,
    run_task_ids: frozenset[int] = frozenset(),
) -> str | Path:
    """What `load_tasks` should read: `--tasks`, else the config's `test_data_file`, else the official set,
    else (the official set not installed, or lacking the runs' tasks) the embedded demo tasks when they hold
    every task of the runs (`run_task_ids`): what `serve` loads without `--tasks`.

    A relative `test_data_file` is taken from the current directory, as the
    reference does, else from the config file's directory. A missing one is an
    error here (the reference falls back to its official dataset with a warning,
    which judges a custom run against the wrong tasks).
    """
    if tasks:
        return tasks
    if config:
        data = config_data if config_data is not None else read_config_file(config)
        named = data.get("test_data_file") if isinstance(data, dict) else None
        if named:
            candidates = (
                [Path(named)] if Path(named).is_absolute() else [Path(named), Path(config).parent / named]
            )
            found = next((path for path in candidates if path.is_file()), None)
            if found is None:
                raise WebArenaLiveError(f"{config}: test_data_file {named} does not exist")
            return found
    official = load_tasks(OFFICIAL_DATASET) if official_dataset_installed() else None
    if official is not None and (not run_task_ids or all(i in official for i in run_task_ids)):
        return OFFICIAL_DATASET
    if run_task_ids and all(i in load_tasks(DEMO_DATASET) for i in run_task_ids):
        return DEMO_DATASET
    if official is not None:
        return OFFICIAL_DATASET  # its "not in the dataset" names the runs it lacks
    raise WebArenaLiveError(
        "which tasks? give --tasks PATH (a dataset file, 'webarena-verified', 'webarena-verified-hard' or "
        "'demo'), or a --config whose test_data_file names one; the official dataset needs: "
        "pip install 'webarena-live[official]'"
    )


@dataclass(frozen=True)
class Batch:
    """One run directory to evaluate, and which of its task folders."""

    root: Path
    selected: list[int]
    skipped: list[int]


def plan_batches(output_dir: Path, task_ids: list[int] | None) -> list[Batch]:
    """Run directories under `output_dir`: itself (`OUT/<task_id>/`), its named runs (`OUT/<run>/<task_id>/`).

    With `task_ids`, each directory evaluates those of them it holds a folder for.
    """
    runs = named_runs(output_dir)
    roots = [output_dir, *runs] if discover_runs(output_dir) != ([], []) or not runs else runs
    batches = []
    for root in roots:
        if task_ids:
            batches.append(Batch(root, [i for i in task_ids if (root / str(i)).is_dir()], []))
        else:
            complete, incomplete = discover_runs(root)
            batches.append(Batch(root, complete, incomplete))
    return batches


def selection_problems(batches: list[Batch], tasks: TaskSet, task_ids: list[int] | None) -> list[str]:
    """Why nothing may run: named task folders that exist nowhere, runs of tasks the dataset lacks."""
    problems = []
    found = {i for batch in batches for i in batch.selected}
    for i in task_ids or []:
        if i not in found:
            problems.append(f"no run folder {' or '.join(str(b.root / str(i)) for b in batches)}")
    unknown = sorted({i for i in found if i not in tasks})
    if unknown:
        ids = ", ".join(str(i) for i in unknown)
        problems.append(
            f"task(s) {ids} not in the dataset {tasks.source} (choose it with --tasks or --config)"
        )
    return problems


def run(args: argparse.Namespace) -> int:
    console = Console()
    errors = Console(stderr=True)
    output_dir = Path(args.output_dir)
    task_ids = list(dict.fromkeys(args.task_ids)) if args.task_ids else None
    try:
        if not output_dir.is_dir():
            raise WebArenaLiveError(f"{output_dir}: output directory does not exist")
        config = read_config_file(args.config) if args.config else None  # read once, for both uses
        # a map of container copies judges by their URLs, as `serve` plans them (no engine asked)
        plain = split_config(config, source=args.config)[0] if args.config else None
        site_map = SiteMap.from_config(plain, source=args.config) if args.config else SiteMap()
        batches = plan_batches(output_dir, task_ids)
        found = frozenset(i for batch in batches for i in batch.selected)
        tasks = load_tasks(dataset_source(args.tasks, args.config, config, run_task_ids=found))
        problems = selection_problems(batches, tasks, task_ids)
    except WebArenaLiveError as error:
        problems = str(error).splitlines()
    if problems:
        for problem in problems:
            errors.print(f"webarena-live evaluate: {problem}", markup=False, highlight=False, soft_wrap=True)
        errors.print("webarena-live evaluate: nothing was written", markup=False, highlight=False)
        return 2
    console.print(f"dataset: {tasks.source}", markup=False, highlight=False, soft_wrap=True)
    for batch in batches:
        report = _evaluate(
            batch, tasks, site_map, errors, use_run_configs=not args.config, whole=not task_ids
        )
        console.print(summary_table(report))
        _print_problems(console, report)
        written = f"verdicts: {batch.root}/<task_id>/eval_result.json"
        if not task_ids:
            written += f"; summary: {batch.root / SUMMARY_FILE}"
        console.print(written, markup=False, highlight=False, soft_wrap=True)
        earlier = evaluate_earlier_attempts(
            batch.root, tasks, site_map, task_ids=task_ids, use_run_configs=not args.config
        )
        if earlier:
            console.print(earlier_line(batch.root, [result for _, result in earlier]), markup=False,
                          highlight=False, soft_wrap=True)  # fmt: skip
    return 0


def earlier_line(root: Path, results: list[TaskResult]) -> str:
    """What was said of the earlier attempts kept aside (`report` counts them with the last ones)."""
    counts = {status: sum(r.status == status for r in results) for status in ("success", "failure", "error")}
    told = ", ".join(f"{count} {status}" for status, count in counts.items() if count)
    return (
        f"earlier attempts: {len(results)} judged ({told}); verdicts: {root}/.attempts/<task_id>/<n>/"
        f"eval_result.json; every attempt in figures: webarena-live report {root}"
    )


def _evaluate(
    batch: Batch, tasks: TaskSet, site_map: SiteMap, errors: Console, *, use_run_configs: bool, whole: bool
) -> BatchReport:
    progress = Progress(
        TextColumn("evaluating"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=errors,
        transient=True,
        disable=len(batch.selected) < PROGRESS_THRESHOLD,
    )
    with progress:
        bar = progress.add_task("evaluate", total=len(batch.selected))
        report = evaluate_directory(
            batch.root,
            tasks,
            site_map,
            task_ids=batch.selected,
            on_result=lambda _result: progress.advance(bar),
            # Without --config each run may carry the site map it was recorded with, as the reference allows.
            use_run_configs=use_run_configs,
            write_summary=whole,
        )
    return report.model_copy(update={"skipped_task_ids": tuple(batch.skipped)})
