"""The HTML page of `webarena-live report --html FILE`: one self-contained file, its charts by Plotly.

Plotly's JavaScript is written into the page once (no CDN), so the file opens offline. The charts
are the success rates per attempt by site and by action with their 95% intervals (each bar's
`success/attempts` label above its interval's whisker, where no error bar crosses it), and with
`--vs` the tasks that flipped each way, by site; the tables under them hold every figure of
`report --json`, the intent templates named by their text, each failing check with its reasons and
the attempts it failed, each linked to its verdict (`eval_result.json`). The links are written
relative to the page's own folder, so they resolve wherever the page is written (beside the run or
not), as long as the two stay where they were.
"""

from __future__ import annotations

import html
import json
import os
from pathlib import Path
from typing import Any
from urllib.request import pathname2url

import plotly.graph_objects as go
import plotly.io as pio

from webarena_live.commands.report_text import (
    exposure_line,
    headline,
    lease_ended_line,
    pool_line,
    repeated,
    templates_title,
)

_STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2rem auto; max-width: 1100px; color: #222; }
table { border-collapse: collapse; margin: .5rem 0 1.5rem; }
td, th { padding: .2rem .6rem; text-align: right; vertical-align: top; white-space: nowrap; }
th { white-space: normal; } td:first-child, th:first-child { text-align: left; }
tr:nth-child(even) { background: #f4f4f4; }
td.text, th.text { text-align: left; white-space: normal; } .muted { color: #666; }
.template { min-width: 16rem; }
.reason { font-family: ui-monospace, monospace; font-size: 12px; white-space: pre-wrap;
  word-break: break-word;
  max-width: 38rem; }
.success { color: #1a7f37; } .failure { color: #b42318; } .error { color: #9a6700; }
"""

_LABEL_GAP = 3.0
"""Percentage points between the top of a bar's interval and its label."""


def _bars(title: str, rows: dict[str, dict[str, Any]]) -> go.Figure:
    names = list(rows)
    rates = [rows[name]["rate"] * 100 for name in names]
    highs = [rows[name]["interval"][1] * 100 for name in names]
    counts = [f"{rows[n]['success']}/{rows[n]['attempts']}" for n in names]
    figure = go.Figure(
        go.Bar(
            x=names,
            y=rates,
            error_y={
                "type": "data",
                "symmetric": False,
                "array": [high - rate for high, rate in zip(highs, rates, strict=True)],
                "arrayminus": [r - rows[n]["interval"][0] * 100 for n, r in zip(names, rates, strict=True)],
            },
            customdata=counts,
            hovertemplate="%{x}: %{y:.1f}% (%{customdata})<extra></extra>",
        )
    )
    for name, high, count in zip(names, highs, counts, strict=True):  # above the whisker, never on it
        figure.add_annotation(x=name, y=high + _LABEL_GAP, text=count, showarrow=False, yanchor="bottom")
    figure.update_layout(
        title=title,
        yaxis={"title": "success rate per attempt, % (95% interval)", "range": [0, 100 + 4 * _LABEL_GAP],
               "tickvals": [0, 20, 40, 60, 80, 100]},
        height=380, margin={"t": 50, "b": 40},
    )  # fmt: skip
    return figure


def _flips(vs: dict[str, Any]) -> go.Figure:
    sites = list(vs["by_site"])
    figure = go.Figure(
        [
            go.Bar(name="succeed only here", x=sites, y=[len(vs["by_site"][s]["only_here"]) for s in sites]),
            go.Bar(
                name="succeed only there", x=sites, y=[-len(vs["by_site"][s]["only_there"]) for s in sites]
            ),
        ]
    )
    figure.update_layout(title="Tasks that flipped, by site", barmode="relative", height=380,
                         yaxis={"title": "tasks (there below zero)"}, margin={"t": 50, "b": 40})  # fmt: skip
    return figure


def _interval(figure: dict[str, Any]) -> str:
    low, high = figure["interval"]
    return f"{figure['rate'] * 100:.1f}% <span class=muted>[{low * 100:.1f}-{high * 100:.1f}]</span>"


def _table(rows: dict[str, dict[str, Any]], *, per_task: bool, names: dict[str, str] | None = None) -> str:
    """Per attempt (and with `per_task`, per task: any, all, mean) for each group; `names` adds a column
    of text (the intent templates)."""
    extra = "<th class=text>intent template</th>" if names else ""
    tasks = "<th>any task</th><th>all attempts</th><th>mean</th>" if per_task else ""
    head = (f"<tr><th></th>{extra}<th>tasks</th><th>attempts</th><th>success</th><th>rate per attempt "
            f"[95% interval]</th>{tasks}<th>errors</th><th>environment</th></tr>")  # fmt: skip
    body = []
    for name, r in rows.items():
        text = (
            f"<td class='text template'>{html.escape(names.get(name, ''))}</td>" if names is not None else ""
        )
        figures = ""
        if per_task:
            t = r["per_task"]
            figures = (f"<td>{t['any']['success']}/{t['any']['tasks']}: {_interval(t['any'])}</td>"
                       f"<td>{t['all']['success']}/{t['all']['tasks']}: {_interval(t['all'])}</td>"
                       f"<td>{t['mean'] * 100:.1f}%</td>")  # fmt: skip
        body.append(f"<tr><td>{html.escape(name)}</td>{text}<td>{r['tasks']}</td><td>{r['attempts']}</td>"
                    f"<td>{r['success']}</td><td>{_interval(r)}</td>{figures}<td>{r['errors']}</td>"
                    f"<td>{r['environment']}</td></tr>")  # fmt: skip
    return f"<table>{head}{''.join(body)}</table>"


class _Links:
    """Links from the page to the run's files, relative to the page's folder."""

    def __init__(self, page: Path, run: Path) -> None:
        self.base = Path(os.path.relpath(run.resolve(), page.resolve().parent))

    def verdict(self, folder: str) -> str:
        return html.escape(pathname2url(str(self.base / folder / "eval_result.json")))


def _attempt_label(folder: str, attempts: int) -> str:
    """`1006`, or for a task tried more than once `1006 #2` (its place among the task's attempts)."""
    parts = folder.split("/")
    if len(parts) == 1:
        return f"{folder} #{attempts}" if attempts > 1 else folder
    return f"{parts[1]} #{parts[2]}"


def _checks(document: dict[str, Any], links: _Links) -> str:
    sizes = {task: len(rows) for task, rows in document["attempts_by_task"].items()}
    rows = []
    for check in document["failing_checks"]:
        reasons = []
        for reason in check["reasons"]:
            attempts = " ".join(
                f'<a href="{links.verdict(f)}">{_attempt_label(f, sizes.get(_task(f), 1))}</a>'
                for f in reason["folders"]
            )
            said = html.escape(reason["reason"]) or "<span class=muted>(no reason given)</span>"
            reasons.append(
                f"<div class=reason>{said}</div><div>{reason['count']} attempt(s): {attempts}</div>"
            )
        rows.append(f"<tr><td>{html.escape(check['check'])}</td><td>{check['count']}</td>"
                    f"<td class=text>{''.join(reasons)}</td></tr>")  # fmt: skip
    head = "<tr><th>check</th><th>attempts</th><th class=text>why, and the attempts it was said of</th></tr>"
    return f"<table>{head}{''.join(rows)}</table>"


def _task(folder: str) -> str:
    parts = folder.split("/")
    return parts[1] if len(parts) > 1 else parts[0]


def _failed_tasks(document: dict[str, Any], links: _Links) -> str:
    """Every attempt of each task that has a non-success, with its session, times and first reason."""
    rows = []
    for task, attempts in document["attempts_by_task"].items():
        if all(a["status"] == "success" for a in attempts):
            continue
        rows += [_attempt_row(task if index == 1 else "", index, a, links)
                 for index, a in enumerate(attempts, start=1)]  # fmt: skip
    if not rows:
        return "<p>Every attempt succeeded.</p>"
    head = ("<tr><th>task</th><th>attempt</th><th class=text>verdict</th><th class=text>session</th>"
            "<th class=text>started, finished</th><th class=text>first reason</th></tr>")  # fmt: skip
    return f"<table>{head}{''.join(rows)}</table>"


def _attempt_row(task: str, index: int, attempt: dict[str, Any], links: _Links) -> str:
    reason = attempt["failing"][0]["reason"] if attempt["failing"] else ""
    when = ", ".join(str(attempt[key]) for key in ("started", "finished") if key in attempt)
    status = html.escape(attempt["status"])
    cells = [
        task, f'<a href="{links.verdict(attempt["folder"])}">#{index}</a>', status,
        html.escape(str(attempt.get("session", ""))), html.escape(when), html.escape(reason),
    ]  # fmt: skip
    classes = ["", "", f"text {status}", "text", "text", "text reason"]
    return (
        "<tr>"
        + "".join(f"<td class='{c}'>{cell}</td>" for c, cell in zip(classes, cells, strict=True))
        + "</tr>"
    )


def render(document: dict[str, Any], note: str, page: Path) -> str:
    """The page of `document` (`report --json`), to be written at `page` (its links start there)."""
    links = _Links(page, Path(document["directory"]))
    per_task = repeated(document)
    figures = [_bars("Success rate by site", document["by_site"]), _bars("By action", document["by_action"])]
    if "vs" in document:
        figures.append(_flips(document["vs"]))
    charts = "".join(
        pio.to_html(figure, full_html=False, include_plotlyjs=index == 0, default_width="100%")
        for index, figure in enumerate(figures)
    )
    overall = {
        "all judged tasks": document,
        **({"hard subset": document["hard"]} if "hard" in document else {}),
    }
    templates = document["by_template"]
    vs = ""
    if "vs" in document:
        v = document["vs"]
        low, high = (bound * 100 for bound in v["interval"])
        vs = (f"<h2>Against {html.escape(v['directory'])}</h2><p>{v['tasks']} tasks judged in both (each "
              f"task's last attempt): {len(v['only_here'])} succeed only here, {len(v['only_there'])} only "
              f"there; difference {v['difference'] * 100:+.1f} points [{low:+.1f}, {high:+.1f}], "
              f"exact McNemar p = {v['p_value']:.3g}</p>")  # fmt: skip
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>webarena-live report</title><style>{_STYLE}</style></head>
<body>
<h1>Run report</h1>
<p><b>{html.escape(document["directory"])}</b>: {html.escape(note)}; {document["missing"]} missing
(not counted as failures), {document["environment"]} environment problem(s).</p>
<p id=headline>{html.escape(headline(document))}</p>
{_pool_lines(document)}
{_table(overall, per_task=per_task)}
{charts}
<h2>By site</h2>{_table(document["by_site"], per_task=per_task)}
<h2>By action</h2>{_table(document["by_action"], per_task=per_task)}
<h2>{html.escape(templates_title(len(templates), len(templates)))}</h2>
{_table(templates, per_task=per_task, names=document.get("templates", {}))}
<h2>Failing checks, and why</h2>{_checks(document, links)}
<h2>The attempts of the tasks that did not always succeed</h2>{_failed_tasks(document, links)}
{vs}
<script type="application/json" id="report-data">{_script_text(document)}</script>
</body></html>
"""


def _pool_lines(document: dict[str, Any]) -> str:
    """What the terminal report says of the replica pool, as paragraphs: resets per site, the attempts
    finished after their lease ended, and the exposed verdicts by site."""
    lines = []
    if document.get("pool"):
        lines.append(("pool", pool_line(document["pool"])))
    if document.get("lease_ended"):
        lines.append(("lease-ended", lease_ended_line(document)))
    if document.get("exposed"):
        lines.append(("exposed", exposure_line(document)))
        exposed = {name: rate for name, rate in document["by_site"].items() if rate.get("exposed")}
        by_site = ", ".join(f"{name} {rate['exposed']}" for name, rate in exposed.items())
        lines.append(("exposed-by-site", f"exposed by site: {by_site}"))
    return "".join(f"<p id={key}>{html.escape(text)}</p>" for key, text in lines)


def _script_text(document: dict[str, Any]) -> str:
    """The figures as JSON inside a `<script>` element (raw text: no entities, so only `</` is escaped)."""
    return json.dumps(document).replace("</", "<\\/")


def write_html(path: Path, document: dict[str, Any], note: str) -> None:
    path.write_text(render(document, note, path), encoding="utf-8")
