"""The fault files and the outputs the documentation shows are the code's: every fault file in `docs/` (a JSON
block with `rules`) is marked and accepted by the real plan parser, one per kind on the reliability page; the
banner line and `/health`'s `faults` shown are what `serve` makes of the file shown; the listed faults
have the keys and the `failing` the code gives them; the report's `faults` figures and line are what
the report computes for the attempts the page describes."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from webarena_live.commands.report_text import faults_line
from webarena_live.evaluator import site_key
from webarena_live.evaluator.run_sites import faults_figures
from webarena_live.evaluator.run_verdicts import Verdict
from webarena_live.runs import fault_plan
from webarena_live.runs.fault_plan import KINDS, parse_faults, plan_line, plan_summary

DOCS = Path(__file__).resolve().parents[2] / "docs"
RELIABILITY = DOCS / "reliability.md"
BLOCK = re.compile(r"(?:<!-- ([\w-]+):? ?([^>]*?) ?-->\n)?```(\w*)\n(.*?)```", re.S)


def blocks(text: str) -> list[tuple[str, str, str, str]]:
    """Each fenced block of `text`: (its marker's name, the marker's words, its language, its text)."""
    return BLOCK.findall(text)


def marked(name: str, text: str = "") -> list[tuple[str, str]]:
    """(words, text) of each block marked `<!-- name: words -->` on the reliability page (or `text`)."""
    return [
        (words, body) for marker, words, _, body in blocks(text or RELIABILITY.read_text()) if marker == name
    ]


def fault_files() -> dict[str, Any]:
    """The reliability page's fault files by name (the first word of their marker)."""
    return {words.split()[0]: json.loads(body) for words, body in marked("fault-plan")}


def test_every_fault_file_in_the_docs_is_marked_and_accepted_by_the_parser() -> None:
    found = 0
    for page in sorted(DOCS.rglob("*.md")):
        for marker, _, language, body in blocks(page.read_text()):
            try:
                data = json.loads(body)
            except ValueError:
                continue
            if not (isinstance(data, dict) and "rules" in data):
                continue
            found += 1
            assert marker == "fault-plan", f"{page}: a fault file without its <!-- fault-plan: ... --> marker"
            assert language == "json", page
            parse_faults(data)  # raises, one line per mistake, on a file the proxy would refuse
    assert found >= 5


def test_the_reliability_page_has_one_fault_file_per_kind() -> None:
    files = fault_files()
    for kind in KINDS:
        plan = parse_faults(files[kind])
        assert [rule.fault for rule in plan.rules] == [kind], kind
    assert {rule.fault for rule in parse_faults(files["every-kind"]).rules} == set(KINDS)


def test_the_module_docs_example_is_a_file_the_parser_accepts() -> None:
    source = Path(fault_plan.__file__).read_text()  # as written: `__doc__` reads its backslashes once more
    (example,) = re.findall(r"\n    (\{\"seed\".*?\]\})\n", source, re.S)
    shown = parse_faults(json.loads(example))
    assert shown == parse_faults(fault_files()["every-kind"])  # the page's file, not another one


def test_the_banner_line_and_health_shown_are_what_serve_makes_of_the_file() -> None:
    plan = parse_faults(fault_files()["every-kind"])
    ((words, banner),) = marked("fault-banner")
    ((same, health),) = marked("fault-health")
    name, source = (part.strip() for part in words.split(","))
    assert (name, source) == tuple(part.strip() for part in same.split(",")) == ("every-kind", source)
    summary = plan_summary(plan, source)
    assert banner.rstrip("\n") == plan_line(summary)
    assert json.loads(health) == {"faults": summary}


def test_the_listed_faults_shown_have_the_codes_keys_and_failing() -> None:
    ((_, listing),) = marked("fault-listing")
    rules = parse_faults(fault_files()["every-kind"]).rules
    for shown in json.loads(listing):
        rule = rules[shown["rule"]]
        where = urlsplit(shown["url"])
        path = where.path + (f"?{where.query}" if where.query else "")
        assert rule.matches(site_key(shown["site"]), path, shown["method"]), shown  # the rule that drew it
        made = fault_plan.fault_record(
            shown["rule"], rule, method=shown["method"], url=shown["url"], site=shown["site"]
        )
        if shown.get("client_gave_up"):  # a latency its client gave up on, listed as it ended
            assert rule.fault == "latency"
            made.update(failing=True, client_gave_up=True)
        if rule.fault == "status":  # shown with the status the rule would answer
            assert shown["status"] == fault_plan.fault_status(rule)
        assert shown == {**made, "site": shown["site"]}, shown
        assert shown["url"].startswith("http://")  # the copy's own address, never `__SITE__/...`


def _verdict(task_id: int, status: str, faults: int) -> Verdict:
    listed = [{"rule": 0, "fault": "drop", "method": "GET", "url": "http://h/", "failing": True}] * faults
    return Verdict(task_id=task_id, status=status, sites=("shopping",), template=9001, action="retrieve",
                   environment=False, attempt={"faults_injected": listed} if faults else {})  # fmt: skip


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 3)
    if isinstance(value, dict):
        return {key: _rounded(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_rounded(item) for item in value]
    return value


@pytest.fixture
def three_tasks() -> dict[str, Any]:
    """The report's `faults` of the page's example: three tasks, each tried without faults then with."""
    attempts = {
        1001: [_verdict(1001, "success", 0), _verdict(1001, "failure", 2)],
        1002: [_verdict(1002, "success", 0), _verdict(1002, "success", 1)],
        1003: [_verdict(1003, "failure", 0), _verdict(1003, "failure", 1)],
    }
    figures = faults_figures(attempts)
    assert figures is not None
    return {"faults": figures}


def test_the_reports_faults_shown_are_what_the_report_computes(three_tasks: dict[str, Any]) -> None:
    ((_, figures),) = marked("report-faults")
    assert json.loads(figures) == _rounded(three_tasks)
    ((_, line),) = marked("report-faults-line")
    assert line.rstrip("\n") == faults_line(three_tasks)
