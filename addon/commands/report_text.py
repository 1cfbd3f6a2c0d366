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


def pool_line(pool: dict[str, Any]) -> str:
    """The replica pool's resets per site, as the proxy kept them."""
    sites = "; ".join(
        f"{site} {c['resets']} resets ({c['reset_seconds']:g} s), {c['resets_skipped']} skipped, "
        f"{c['resets_failed']} failed"
        for site, c in pool.get("sites", {}).items()
    )
    return f"replicas (--isolation {pool.get('isolation')}; {pool.get('scope')}): {sites}"


def exposure_line(document: dict[str, Any]) -> str:
    """How many verdicts another session's change could have decided, and the rate with and without them."""
    clean = document["unexposed"]
    low, high = clean["interval"]
    ids = document["exposed_task_ids"][:20]
    return (
        f"exposed: {document['exposed']} of {document['attempts']} attempts saw another session change a "
        f"site copy they used (task ids {ids}); success {document['rate'] * 100:.1f}% with them, "
        f"{clean['rate'] * 100:.1f}% [{low * 100:.0f}-{high * 100:.0f}] over the {clean['tasks']} attempts "
        "nobody else's change reached"
    )


def lease_ended_line(document: dict[str, Any]) -> str:
    """The attempts finished after their lease ended (their verdict judges only what was captured before)."""
    ended = document["lease_ended"]
    shown = ", ".join(f"{e['folder']} ({e['lease_ended']})" for e in ended[:20])
    more = f" (+{len(ended) - 20} more)" if len(ended) > 20 else ""
    return f"lease ended before the finish: {len(ended)} attempt(s): {shown}{more}"


def site_errors_line(document: dict[str, Any]) -> str | None:
    """The verdicts whose session saw its sites fail, per site and replica; None when there are none."""
    errors = document.get("site_errors") or {}
    if not errors.get("verdicts"):
        return None
    by = ", ".join(
        f"{name} {entry['verdicts']} ({entry['failing_answers']} failing answers)"
        for name, entry in errors["by_replica"].items()
    )
    return f"verdicts on failing sites (500, 502-504, no answer): {errors['verdicts']}, by replica: {by}"


def faults_line(document: dict[str, Any]) -> str | None:
    """Success with and without the faults made on purpose, and paired over the tasks tried both ways."""
    faults = document.get("faults")
    if not faults:
        return None
    with_, without, paired = faults["with_faults"], faults["without_faults"], faults["paired"]

    def rate(part: dict[str, Any]) -> str:
        return f"{part['success']}/{part['attempts']}"

    line = f"faults made on purpose: success {rate(with_)} attempts with faults, {rate(without)} without"
    if paired["tasks"]:
        low, high = paired["interval"]
        line += (
            f"; paired over {paired['tasks']} task(s): {paired['difference']:+.1%} "
            f"[{low:+.1%}, {high:+.1%}], McNemar p={paired['mcnemar_p']:.3g}"
        )
    return line
