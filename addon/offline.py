"""`webarena-live evaluate`: score a directory of recorded runs offline.

Same contract as the reference's `eval-tasks`: every `DIR/<task_id>/` holding
`agent_response.json` and `network.har` gets a `DIR/<task_id>/eval_result.json`,
and a per-site summary is printed. The exit status is 0 whenever the batch
ran, whatever the verdicts; it is 2 when the dataset, the site map or the
directory cannot be used at all.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from webarena_live.evaluator.batch import SUMMARY_FILE, BatchReport, discover_runs, evaluate_directory
from webarena_live.evaluator.errors import WebArenaLiveError
from webarena_live.evaluator.results import TaskResult
from webarena_live.evaluator.sites import SiteMap
from webarena_live.evaluator.tasks import load_tasks

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


def _print_problems(console: Console, report: BatchReport) -> None:
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
        ids = ", ".join(str(i) for i in report.skipped_task_ids)
        console.print(f"[yellow]skipped (agent_response.json or network.har missing):[/] {ids}")


def _error_text(result: TaskResult) -> str:
    if result.error_msg:
        return result.error_msg
    return "; ".join(r.error_msg or "" for r in result.evaluators_results if r.error_msg) or "error"


def run(args: argparse.Namespace) -> int:
    console = Console()
    errors = Console(stderr=True)
    output_dir = Path(args.output_dir)
    try:
        tasks = load_tasks(args.tasks)
        site_map = SiteMap.load(args.config) if args.config else SiteMap()
        if not output_dir.is_dir():
            raise WebArenaLiveError(f"{output_dir}: output directory does not exist")
        skipped: list[int] = []
        if args.task_ids:
            selected = list(dict.fromkeys(args.task_ids))
        else:
            selected, skipped = discover_runs(output_dir)
    except WebArenaLiveError as error:
        errors.print(f"webarena-live evaluate: {error}", markup=False, highlight=False, soft_wrap=True)
        return 2

    show_progress = len(selected) >= PROGRESS_THRESHOLD
    progress = Progress(
        TextColumn("evaluating"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=errors,
        transient=True,
        disable=not show_progress,
    )
    with progress:
        bar = progress.add_task("evaluate", total=len(selected))
        report = evaluate_directory(
            output_dir,
            tasks,
            site_map,
            task_ids=selected,
            on_result=lambda _result: progress.advance(bar),
            # Without --config each run may carry the site map it was recorded with, as the reference allows.
            use_run_configs=not args.config,
            write_summary=not args.task_ids,
        )
    report = report.model_copy(update={"skipped_task_ids": tuple(skipped)})
    console.print(summary_table(report))
    _print_problems(console, report)
    written = f"verdicts: {output_dir}/<task_id>/eval_result.json"
    if not args.task_ids:
        written += f"; summary: {output_dir / SUMMARY_FILE}"
    console.print(written, markup=False, highlight=False, soft_wrap=True)
    return 0


if __name__ == "__main__":  # pragma: no cover - convenience for `python -m addon.offline`
    from webarena_live.addon.cli import main

    sys.exit(main(["evaluate", *sys.argv[1:]]))
