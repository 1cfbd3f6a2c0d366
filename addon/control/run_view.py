"""The dashboard's run view: the run in figures, as `webarena-live report` gives them on the output dir.

One function under `GET /report`, over the evaluator's `report_run`: the same figures the command
prints, read from the same files, so the two always agree. Verdicts are read again only when their
`eval_result.json` changed (`VerdictCache`), and the reading runs in a worker thread: the proxy's
event loop keeps capturing while a large run directory is read.
"""

from __future__ import annotations

import asyncio
import importlib.util
from pathlib import Path
from typing import Any

from webarena_live.control.bodies import ControlError
from webarena_live.evaluator import (
    ReportError,
    RunReport,
    TaskSet,
    VerdictCache,
    named_runs,
    report_run,
    run_name_problem,
)

_cache = VerdictCache()


def plotly_script() -> Path:
    """Plotly's JavaScript as the installed `plotly` package ships it: the run view draws its chart
    with the library `report --html` uses, served from here (no CDN)."""
    spec = importlib.util.find_spec("plotly")  # its file only: importing plotly is not needed
    assert spec is not None and spec.origin is not None, "plotly is a dependency"
    return Path(spec.origin).parent / "package_data" / "plotly.min.js"


async def run_figures(output_dir: Path | None, tasks: TaskSet, run: str | None) -> dict[str, Any]:
    """`report --json` of the output directory (of its named run `run`), with `named_runs`: the named
    runs it holds. A directory with no verdict yet reports no judged task (every task missing)."""
    if output_dir is None:
        raise ControlError(409, "no_output_dir", "this proxy writes no outputs (serve --output-dir DIR)")
    if run is not None and (problem := run_name_problem(run)):
        raise ControlError(400, "bad_run_name", problem)
    directory = output_dir / run if run else output_dir
    if run and not directory.is_dir():
        raise ControlError(404, "unknown_run", f"no run named {run!r} in {output_dir}")
    return await asyncio.to_thread(_figures, directory, tasks)


def _figures(directory: Path, tasks: TaskSet) -> dict[str, Any]:
    try:
        report = report_run(directory, tasks, read=_cache.read)
    except ReportError:  # no task folder yet
        report = RunReport(directory, {}, missing=tuple(sorted(tasks)))
    return {**report.to_dict(), "named_runs": [path.name for path in named_runs(directory)]}
