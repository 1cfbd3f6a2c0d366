"""The HTML page of `webarena-live report --html`: one self-contained file, its charts by Plotly.

Plotly's JavaScript is written into the page once (no CDN), so the file opens offline. The charts
are the per-site success rates with their 95% intervals, the rates by action, and with `--vs` the
tasks that flipped each way, by site; the tables under them hold every figure of `report --json`,
with each failing check's tasks linked to their verdicts (`<task_id>/eval_result.json`).
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio

_STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2rem auto; max-width: 1100px; color: #222; }
table { border-collapse: collapse; margin: .5rem 0 1.5rem; }
td, th { padding: .2rem .6rem; text-align: right; }
td:first-child, th:first-child { text-align: left; } tr:nth-child(even) { background: #f4f4f4; }
.muted { color: #666; }
"""


def _bars(title: str, rows: dict[str, dict[str, Any]]) -> go.Figure:
    names = list(rows)
    rates = [rows[name]["rate"] * 100 for name in names]
    figure = go.Figure(
        go.Bar(
            x=names,
            y=rates,
            error_y={
                "type": "data",
                "symmetric": False,
                "array": [rows[n]["interval"][1] * 100 - r for n, r in zip(names, rates, strict=True)],
                "arrayminus": [r - rows[n]["interval"][0] * 100 for n, r in zip(names, rates, strict=True)],
            },
            text=[f"{rows[n]['success']}/{rows[n]['tasks']}" for n in names],
            hovertemplate="%{x}: %{y:.1f}% (%{text})<extra></extra>",
        )
    )
    figure.update_layout(title=title, yaxis={"title": "success rate, % (95% interval)", "range": [0, 100]},
                         height=380, margin={"t": 50, "b": 40})  # fmt: skip
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


def _table(rows: dict[str, dict[str, Any]]) -> str:
    head = "<tr><th></th><th>tasks</th><th>success</th><th>rate</th><th>95% interval</th><th>errors</th>" \
           "<th>environment</th></tr>"  # fmt: skip
    body = "".join(
        f"<tr><td>{html.escape(name)}</td><td>{r['tasks']}</td><td>{r['success']}</td>"
        f"<td>{r['rate'] * 100:.1f}%</td><td>{r['interval'][0] * 100:.1f}-{r['interval'][1] * 100:.1f}%</td>"
        f"<td>{r['errors']}</td><td>{r['environment']}</td></tr>"
        for name, r in rows.items()
    )
    return f"<table>{head}{body}</table>"


def render(document: dict[str, Any], note: str) -> str:
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
    checks = "".join(
        f"<tr><td>{html.escape(c['check'])}</td><td>{c['count']}</td><td>"
        + " ".join(f'<a href="{i}/eval_result.json">{i}</a>' for i in c["task_ids"])
        + "</td></tr>"
        for c in document["failing_checks"]
    )
    vs = ""
    if "vs" in document:
        v = document["vs"]
        low, high = (bound * 100 for bound in v["interval"])
        vs = (f"<h2>Against {html.escape(v['directory'])}</h2><p>{v['tasks']} tasks judged in both: "
              f"{len(v['only_here'])} succeed only here, {len(v['only_there'])} only there; difference "
              f"{v['difference'] * 100:+.1f} points [{low:+.1f}, {high:+.1f}], "
              f"exact McNemar p = {v['p_value']:.3g}</p>")  # fmt: skip
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>webarena-live report</title><style>{_STYLE}</style></head>
<body>
<h1>Run report</h1>
<p><b>{html.escape(document["directory"])}</b>: {html.escape(note)}; {document["missing"]} missing
(not counted as failures), {document["environment"]} environment problem(s).</p>
{_table(overall)}
{charts}
<h2>By site</h2>{_table(document["by_site"])}
<h2>By action</h2>{_table(document["by_action"])}
<h2>By intent template</h2>{_table(document["by_template"])}
<h2>Failing checks</h2><table><tr><th>check</th><th>tasks</th><th>task ids</th></tr>{checks}</table>
{vs}
<script type="application/json" id="report-data">{_script_text(document)}</script>
</body></html>
"""


def _script_text(document: dict[str, Any]) -> str:
    """The figures as JSON inside a `<script>` element (raw text: no entities, so only `</` is escaped)."""
    return json.dumps(document).replace("</", "<\\/")


def write_html(path: Path, document: dict[str, Any], note: str) -> None:
    path.write_text(render(document, note), encoding="utf-8")
