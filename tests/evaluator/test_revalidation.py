"""A 304 answering the browser's own revalidation is the page the browser showed (evaluator/revalidation.py).

Unit rules on events and records, the HAR round trip of what the wire said (`_wire`), the offline rule
on a proxy's HAR (and none on a browser's own), and the reference on the same files: the reference
judges a plain proxy's HAR by its 304 (a documented difference), and our export of that file, or the
browser's own HAR, as the browser saw it. The browser's entries for pages reused from its cache without
a request carry no Accept header: the reference does not count them as navigations.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.oracle_bridge import ask_oracle_network
from webarena_live.evaluator import (
    NetworkEvent,
    Revalidations,
    SiteMap,
    Task,
    evaluate_task,
    event_to_har_entry,
    event_to_har_json,
    trace_to_har,
)
from webarena_live.evaluator.har import event_from_har_entry, har_from_document

SITE = "http://127.0.0.1:8899"
PAGE = f"{SITE}/testwiki/Page_B"
DOCUMENT = (
    ("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"),
    ("Sec-Fetch-Dest", "document"),
    ("Sec-Fetch-Mode", "navigate"),
    ("Sec-Fetch-User", "?1"),
)
INM = (("If-None-Match", '"1795634341528101390/cz"'),)
FETCH = (("Accept", "*/*"), ("Sec-Fetch-Dest", "empty"), ("Sec-Fetch-Mode", "cors"))
STYLE = (("Accept", "text/css,*/*;q=0.1"), ("Sec-Fetch-Dest", "style"), ("Sec-Fetch-Mode", "no-cors"))
CACHE_HIT = (("Upgrade-Insecure-Requests", "1"), ("User-Agent", "Mozilla/5.0"))
"""The request headers of a page the browser took from its cache without asking (no Accept)."""


def ok(
    url: str, headers: tuple[tuple[str, str], ...], body: str | None = None, mime: str = "text/html"
) -> NetworkEvent:
    size = len(body) if body is not None else 120
    return NetworkEvent(
        "GET", url, 200, headers, status_text="OK", response_body=body, response_mime=mime,
        response_body_size=size, content_size=size, request_body_size=0,
    )  # fmt: skip


def not_modified(url: str, headers: tuple[tuple[str, str], ...]) -> NetworkEvent:
    return NetworkEvent(
        "GET", url, 304, headers, status_text="Not Modified", response_body_size=0, content_size=0,
        request_body_size=0,
    )  # fmt: skip


def test_a_revalidated_page_is_the_cached_200_with_the_wire_kept_beside() -> None:
    view = Revalidations()
    first = ok(f"{SITE}/api/stock", FETCH, body='{"stock": 17}', mime="application/json")
    assert view.browser_view(first) is first
    seen = view.browser_view(not_modified(f"{SITE}/api/stock", FETCH + INM))
    assert (seen.status, seen.status_text, seen.wire) == (200, "OK", (304, "Not Modified"))
    assert seen.response_body == '{"stock": 17}' and seen.content_size == 13
    assert seen.response_mime == "application/json"
    assert seen.response_body_size == 0  # nothing came over the wire
    assert seen.response_body is first.response_body  # the kept text, no copy
    assert view.met == 1
    assert seen.summary()["wire_status"] == 304 and "wire_status" not in first.summary()


def test_records_are_read_like_events() -> None:
    view = Revalidations()
    view.browser_view(ok(PAGE, DOCUMENT).record)
    seen = view.browser_view(not_modified(PAGE, DOCUMENT + INM).record)
    assert isinstance(seen, tuple)
    event = NetworkEvent(*seen)
    assert (event.status, event.wire, event.response_mime) == (200, (304, "Not Modified"), "text/html")


@pytest.mark.parametrize(
    ("headers", "why"),
    [
        (STYLE + INM, "a stylesheet revalidated by the page stays 304 in the browser's HAR"),
        (DOCUMENT, "no condition: the site's own 304, not the browser's revalidation"),
        ((*INM, ("Accept", "text/html")), "no sec-fetch-dest: a client that asked itself saw the 304"),
    ],
)
def test_other_304s_stay_what_the_wire_said(headers: tuple[tuple[str, str], ...], why: str) -> None:
    view = Revalidations()
    view.browser_view(ok(PAGE, DOCUMENT))
    kept = not_modified(PAGE, headers)
    assert view.browser_view(kept) is kept, why
    assert view.met == 0


def test_without_an_earlier_200_the_status_is_the_browsers_and_no_body_is_invented() -> None:
    seen = Revalidations().browser_view(not_modified(PAGE, DOCUMENT + INM))
    assert (seen.status, seen.status_text, seen.response_body) == (200, "OK", None)
    assert seen.wire == (304, "Not Modified")


def test_the_map_of_earlier_pages_is_bounded_oldest_first() -> None:
    view = Revalidations(limit=2)
    for name in ("a", "b", "a", "c"):  # "a" seen again: "b" is now the oldest
        view.browser_view(ok(f"{SITE}/{name}", DOCUMENT, body=name, mime="application/json"))
    assert view.browser_view(not_modified(f"{SITE}/a", DOCUMENT + INM)).response_body == "a"
    assert view.browser_view(not_modified(f"{SITE}/b", DOCUMENT + INM)).response_body is None


def test_the_wire_survives_the_har_both_ways() -> None:
    view = Revalidations()
    view.browser_view(ok(PAGE, DOCUMENT))
    seen = view.browser_view(not_modified(PAGE, DOCUMENT + INM))
    entry = event_to_har_entry(seen)
    assert entry["response"]["status"] == 200
    assert entry["response"]["_wire"] == {"status": 304, "statusText": "Not Modified"}
    assert json.loads(event_to_har_json(seen)) == entry
    assert json.loads(event_to_har_json(seen.record)) == entry
    assert event_from_har_entry(entry).record == seen.record
    assert "_wire" not in event_to_har_entry(ok(PAGE, DOCUMENT))["response"]


def savehar(entries: list[NetworkEvent], creator: str = "mitmproxy") -> dict[str, Any]:
    """A HAR as a recorder of `creator` writes it: the events as they were on the wire."""
    document = trace_to_har(entries)
    document["log"]["creator"]["name"] = creator
    return document


def test_a_proxys_har_is_read_as_the_browser_saw_it_and_a_browsers_own_as_it_is() -> None:
    wire = [ok(PAGE, DOCUMENT), not_modified(PAGE, DOCUMENT + INM)]
    read = har_from_document(savehar(wire), source="mitm.har")
    assert [(e.status, e.wire) for e in read] == [(200, None), (200, (304, "Not Modified"))]
    # A browser's own HAR already says what the browser saw; a 304 in it is one the page saw.
    as_recorded = har_from_document(savehar(wire, creator="Playwright"), source="pw.har")
    assert [e.status for e in as_recorded] == [200, 304]
    bare_list = har_from_document(trace_to_har(wire)["log"]["entries"], source="list")
    assert [e.status for e in bare_list] == [200, 200]


# -- the reference on the same files -----------------------------------------------------------

TASK: dict[str, Any] = {
    "sites": ["wikipedia"],
    "task_id": 9901,
    "intent_template_id": 9901,
    "start_urls": ["__WIKIPEDIA__/testwiki/Main_Page"],
    "intent": "Open the article Page B",
    "intent_template": "Open the article {{title}}",
    "instantiation_dict": {"title": "Page B"},
    "eval": [
        {
            "evaluator": "AgentResponseEvaluator",
            "results_schema": {"type": "null"},
            "expected": {"task_type": "navigate", "status": "SUCCESS", "retrieved_data": None},
        },
        {
            "evaluator": "NetworkEventEvaluator",
            "expected": {"url": "__WIKIPEDIA__/testwiki/Page_B", "response_status": 200},
        },
    ],
    "revision": 1,
}
ANSWER = {"task_type": "navigate", "status": "SUCCESS", "retrieved_data": None}
CONFIG = {"environments": {"__WIKIPEDIA__": {"urls": [SITE]}}}


def test_the_reference_on_the_same_files(oracle_python: Path, tmp_path: Path) -> None:
    other = f"{SITE}/testwiki/Page_A"
    files = {
        # mitmproxy's savehar of a run ending in a reload of the answer page: the wire's 304
        "reload_savehar": savehar([ok(PAGE, DOCUMENT), not_modified(PAGE, DOCUMENT + INM)]),
        # the browser's HAR of it: a 200 (the cached page)
        "reload_browser": savehar([ok(PAGE, DOCUMENT), ok(PAGE, DOCUMENT + INM)], creator="Playwright"),
        # the answer page, another page, then back: the browser took the answer page from its cache
        "back_browser": savehar(
            [ok(PAGE, DOCUMENT), ok(other, DOCUMENT), ok(PAGE, CACHE_HIT)], creator="Playwright"
        ),
        "back_wire": savehar([ok(PAGE, DOCUMENT), ok(other, DOCUMENT)]),
    }
    task, site_map = Task.model_validate(TASK), SiteMap.from_dict(CONFIG)
    runs, ours = [], {}
    for name, document in files.items():
        original = tmp_path / f"{name}.har"
        original.write_text(json.dumps(document))
        trace = har_from_document(document, source=name)
        exported = tmp_path / f"{name}.exported.har"
        exported.write_text(json.dumps(trace_to_har(trace)))
        ours[name] = evaluate_task(task, ANSWER, trace, site_map=site_map).status.value
        runs += [{"task": TASK, "response": ANSWER, "har": str(file)} for file in (original, exported)]
    request = tmp_path / "request.json"
    request.write_text(json.dumps({"config": CONFIG, "runs": runs}))
    verdicts = iter(verdict["status"] for verdict in ask_oracle_network(oracle_python, "evaluate", request))
    reference = {name: (next(verdicts), next(verdicts)) for name in files}  # (original, our export)
    assert ours == {"reload_savehar": "success", "reload_browser": "success",
                    "back_browser": "failure", "back_wire": "failure"}  # fmt: skip
    # The documented difference: the reference judges the wire's 304 on a proxy's HAR; on our export
    # of that file, and on the browser's own HAR, it agrees with us.
    assert reference["reload_savehar"] == ("failure", "success")
    assert reference["reload_browser"] == ("success", "success")
    # A page taken from the cache (no Accept header) is no navigation to the reference: the browser's
    # HAR and the wire, which never saw it, give the same verdict.
    assert reference["back_browser"] == ("failure", "failure") == reference["back_wire"]
