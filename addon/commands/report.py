"""`webarena-live report OUT [--vs OTHER] [--json] [--html FILE]`: a whole run in figures.

The figures are the evaluator's (`report_run`, `compare_runs`); this module picks the dataset as
`evaluate` does, prints them as tables (rich) or JSON, and writes the HTML page
(`commands/report_html.py`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from webarena_live.commands.evaluate import dataset_source
from webarena_live.commands.report_text import (
    TEMPLATES_SHOWN,
    exposure_line,
    faults_line,
    headline,
    lease_ended_line,
    percent,
    pool_line,
    repeated,
    site_errors_line,
    template_name,
    templates_title,
)
from webarena_live.evaluator import (
    OFFICIAL_DATASET,
    OFFICIAL_HARD_SUBSET,
    TaskSet,
    WebArenaLiveError,
    compare_runs,
    load_tasks,
    official_dataset_installed,
    official_subset_ids,
    report_run,
)


def _dataset(args: argparse.Namespace) -> tuple[TaskSet | None, frozenset[int] | None, str]:
    """The tasks to report over, the hard subset's ids when they are the official ones, and a note."""
    if not args.tasks and not args.config and not official_dataset_installed():
        return None, None, "no dataset (--tasks): sites and templates from the verdicts, no missing tasks"
    source = dataset_source(args.tasks, args.config)
    tasks = load_tasks(source)
    hard = None
    if str(source) in (OFFICIAL_DATASET, OFFICIAL_HARD_SUBSET):
        hard = frozenset(official_subset_ids(OFFICIAL_HARD_SUBSET))
    elif _is_official_file(Path(source)):  # the dataset file of a reference package, named by its path
        hard = frozenset(official_subset_ids(OFFICIAL_HARD_SUBSET, Path(source)))
    return tasks, hard, f"{len(tasks)} tasks from {tasks.source}"


def _is_official_file(path: Path) -> bool:
    return (
        path.name == f"{OFFICIAL_DATASET}.json"
        and (path.parent / "subsets" / f"{OFFICIAL_HARD_SUBSET}.json").is_file()
    )


def report_document(args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    """Every figure of `report` as one JSON document, and the dataset's note."""
    tasks, hard, note = _dataset(args)
    here = report_run(Path(args.directory), tasks, hard=hard)
    document = here.to_dict()
    if args.vs:
        there = report_run(Path(args.vs), tasks, hard=hard)
        document["vs"] = {"directory": str(there.directory), **compare_runs(here, there)}
    return document, note


def _compact(rate: dict[str, Any]) -> str:
    low, high = rate["interval"]
    return f"{rate['rate'] * 100:.1f}% [{low * 100:.0f}-{high * 100:.0f}]"


def _rates(title: str, rows: dict[str, dict[str, Any]], *, per_task: bool) -> Table:
    """Figures per group: per attempt, and with `per_task` the tasks with any successful attempt and
    the mean of the tasks' rates (narrow enough for 80 columns: the failures are what is left)."""
    table = Table(
        title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True
    )
    table.add_column("", overflow="fold", min_width=12)
    columns: tuple[str, ...]
    if per_task:
        columns = ("tasks", "attempts", "success", "rate [95% CI]", "any", "mean", "err.", "env.")
    else:
        columns = ("tasks", "success", "rate [95% interval]", "failure", "errors", "environment")
    for column in columns:
        table.add_column(column, justify="right", no_wrap=True)
    for name, rate in rows.items():
        if per_task:
            tasks = rate["per_task"]
            anyone, mean = f"{tasks['any']['success']}/{tasks['any']['tasks']}", f"{tasks['mean'] * 100:.0f}%"
            counts = (str(rate["tasks"]), str(rate["attempts"]), str(rate["success"]))
            table.add_row(name, *counts, _compact(rate), anyone, mean, str(rate["errors"]),
                          str(rate["environment"]))  # fmt: skip
        else:
            table.add_row(name, str(rate["tasks"]), str(rate["success"]), percent(rate),
                          str(rate["failure"]), str(rate["errors"]), str(rate["environment"]))  # fmt: skip
    return table


def _reason(check: dict[str, Any], width: int = 160) -> str:
    reasons = check["reasons"]
    first = reasons[0]["reason"] or "(no reason given)" if reasons else ""
    first = first if len(first) <= width else first[: width - 1] + "…"
    more = len(reasons) - 1
    return first + (f"  (+{more} other reason{'s' if more > 1 else ''})" if more > 0 else "")


def print_report(console: Console, document: dict[str, Any], note: str) -> None:
    console.print(f"[bold]{document['directory']}[/bold]: {note}")
    console.print(headline(document), markup=False, highlight=False)
    per_task = repeated(document)
    overall = {"all judged tasks": document}
    if "hard" in document:
        overall["hard subset"] = document["hard"]
    console.print(_rates("Overall", overall, per_task=per_task))
    if document["missing"]:
        missing = document["missing"]
        console.print(f"{missing} task(s) of the dataset have no verdict here: missing, not failures")
    if document["unjudged_folders"]:
        console.print(
            f"not judged yet (run `webarena-live evaluate` first): {document['unjudged_folders'][:20]}"
        )
    if document["environment"]:
        console.print(f"environment problems (UNKNOWN_ERROR answers, sites that did not answer): "
                      f"{document['environment_task_ids'][:20]}")  # fmt: skip
    if document.get("pool"):
        console.print(pool_line(document["pool"]), markup=False, highlight=False, soft_wrap=True)
    if document.get("lease_ended"):
        console.print(lease_ended_line(document), markup=False, highlight=False, soft_wrap=True)
    for line in (site_errors_line(document), faults_line(document)):
        if line is not None:
            console.print(line, markup=False, highlight=False, soft_wrap=True)
    if document.get("exposed"):
        console.print(exposure_line(document), markup=False, highlight=False, soft_wrap=True)
        exposed = {name: rate for name, rate in document["by_site"].items() if rate.get("exposed")}
        console.print(
            "exposed by site: " + ", ".join(f"{name} {rate['exposed']}" for name, rate in exposed.items())
        )
    console.print(_rates("By site (a task of several sites counts under each)", document["by_site"],
                         per_task=per_task))  # fmt: skip
    console.print(_rates("By action", document["by_action"], per_task=per_task))
    templates = document["by_template"]
    worst = sorted(templates.items(), key=lambda item: item[1]["rate"])[:TEMPLATES_SHOWN]
    named = {template_name(document, name): rate for name, rate in worst}
    console.print(_rates(templates_title(len(templates)), named, per_task=per_task))
    checks = Table(title="Failing checks, most frequent first, and why", title_justify="left",
                   box=box.SIMPLE_HEAD, pad_edge=False)  # fmt: skip
    for column in ("check", "attempts", "task ids", "reason"):
        checks.add_column(column, overflow="fold", ratio=3 if column == "reason" else None)
    for check in document["failing_checks"][:15]:
        shown = ", ".join(map(str, check["task_ids"][:12])) + (" …" if len(check["task_ids"]) > 12 else "")
        checks.add_row(check["check"], str(check["count"]), shown, _reason(check))
    console.print(checks)
    if "vs" in document:
        _print_comparison(console, document["vs"])


def _print_comparison(console: Console, vs: dict[str, Any]) -> None:
    table = Table(title=f"Against {vs['directory']} (paired, on the tasks both judged)", title_justify="left")
    for column in ("", "tasks", "only here", "only there", "difference [95% interval]", "McNemar p"):
        table.add_column(column, justify="left" if not column else "right")
    for name, row in {"all": vs, **vs["by_site"]}.items():
        low, high = row["interval"]
        table.add_row(name, str(row["tasks"]), str(len(row["only_here"])), str(len(row["only_there"])),
                      f"{row['difference'] * 100:+.1f} pts [{low * 100:+.1f}, {high * 100:+.1f}]",
                      f"{row['p_value']:.3g}")  # fmt: skip
    console.print(table)
    console.print(f"succeed only here: {vs['only_here'][:30]}\nsucceed only there: {vs['only_there'][:30]}")


NO_TERMINAL_WIDTH = 160
"""The report's width with no terminal at all (a file, a CI log, a tool's output): room for every table
at its natural width (a template's name, then the figures), where 80 columns cut the last heading."""


def terminal_width() -> int | None:
    """The columns of the terminal the report is read in: $COLUMNS, else the terminal of stdout, stderr
    or stdin, else the process's controlling terminal (`/dev/tty`: a report whose streams all go to
    files or pipes, as a tool runs it, is still read in that terminal); None without one."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    for stream in (sys.stdout, sys.stderr, sys.stdin):
        try:
            return os.get_terminal_size(stream.fileno()).columns
        except (AttributeError, ValueError, OSError):
            continue
    try:
        tty = os.open("/dev/tty", os.O_RDONLY | os.O_NOCTTY)
    except OSError:
        return None
    try:
        return os.get_terminal_size(tty).columns or None
    except OSError:
        return None
    finally:
        os.close(tty)


def run(args: argparse.Namespace) -> int:
    console = Console(width=terminal_width() or NO_TERMINAL_WIDTH)
    try:
        document, note = report_document(args)
    except WebArenaLiveError as error:
        for line in str(error).splitlines():
            print(f"webarena-live report: {line}", file=sys.stderr)
        return 2
    if args.html:  # first: a reader that stops reading the tables early (`| head`) still gets the page
        from webarena_live.commands.report_html import write_html

        write_html(Path(args.html), document, note)
    if args.json:
        print(json.dumps(document, indent=2))
    else:
        print_report(console, document, note)
        if args.html:
            console.print(f"HTML report: {args.html}")
    return 0
