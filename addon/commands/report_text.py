"""The words of a run report, shared by its table, its HTML page and the dashboard's wording: the
headline sentence, the intent templates by their text, the headings.

The figures are the evaluator's (`evaluator/run_report.py`); these functions read `report --json`'s
document.
"""

from __future__ import annotations

from typing import Any

TEMPLATES_SHOWN = 10
"""Intent templates the table lists (the lowest rates first) when a run has more."""


def percent(rate: dict[str, Any]) -> str:
    low, high = rate["interval"]
    return f"{rate['rate'] * 100:5.1f}%  [{low * 100:.1f}-{high * 100:.1f}]"


def repeated(document: dict[str, Any]) -> bool:
    """Whether some task was attempted more than once: then per-attempt and per-task figures differ."""
    return bool(document["attempts"] != document["tasks"])


def headline(document: dict[str, Any]) -> str:
    """The run in one sentence: attempts and tasks, as the dashboard also says it."""
    if not document["attempts"]:
        return "no verdict yet: no task of this run has been judged"
    rate, tasks = document, document["per_task"]
    if not repeated(document):
        return f"{rate['success']} of {rate['tasks']} judged tasks succeed: {percent(rate).strip()}"
    return (
        f"{rate['success']} of {rate['attempts']} judged attempts of {rate['tasks']} tasks succeed: "
        f"{percent(rate).strip()} per attempt; per task: any {percent(tasks['any']).strip()}, "
        f"all {percent(tasks['all']).strip()}, mean {tasks['mean'] * 100:.1f}%; the last attempt of each "
        f"(what the reference's tooling judges): {percent(tasks['last']).strip()}"
    )


def template_name(document: dict[str, Any], template: str, width: int = 64) -> str:
    """A template by its intent template text (its id first), cut to `width` characters."""
    text = document.get("templates", {}).get(template)
    named = f"{template}  {text}" if text else template
    return named if len(named) <= width else named[: width - 1] + "…"


def templates_title(count: int, shown: int = TEMPLATES_SHOWN) -> str:
    """The heading of the templates' table: all of them, or the lowest `shown` of `count`."""
    if count <= shown:
        return "By intent template"
    return f"By intent template: the {shown} lowest of {count}"
