"""The rule that says whether a task's sites answered a session (evaluator/site_answers.py): one rule for
the live finish's `sites_answered` and for the rewards reading a trace from an older server."""

from __future__ import annotations

from webarena_live.evaluator import (
    UNREACHABLE_STATUSES,
    NetworkEvent,
    NetworkTrace,
    excuse,
    site_errors_field,
    site_origins,
    sites_answered_fields,
    unanswered_events,
    url_origin,
)
from webarena_live.evaluator.trace import RECORD_FIELDS

SITES = {
    "__SHOPPING__": ["http://Shop.test:7770", "http://shop-2.test:7770/"],
    "__WIKI__": ["https://wiki.test"],
}


def event(type_: str, url: str, status: int, **more: object) -> dict[str, object]:
    return {"type": type_, "method": "GET", "url": url, "status": status, **more}


def test_origins_are_every_url_of_the_map_with_its_port_written() -> None:
    assert url_origin("https://wiki.test/a?b") == "https://wiki.test:443"
    assert site_origins(SITES) == {
        "http://shop.test:7770",
        "http://shop-2.test:7770",
        "https://wiki.test:443",
    }
    assert site_origins({"s": {"replicas": [{"urls": ["http://r.test"]}]}}) == {"http://r.test:80"}
    assert site_origins(None) == frozenset()


def test_only_judged_requests_to_mapped_sites_that_got_no_answer_count() -> None:
    origins = site_origins(SITES)
    events = [
        event("navigation", "http://shop.test:7770/", 200),
        event("asset", "http://shop.test:7770/app.js", 0),  # an asset says nothing of the verdict
        event("navigation", "http://elsewhere.test/", 502),  # not a site of the task's map
        {**event("mutation", "http://shop-2.test:7770/cart", 503), "method": "POST"},
        event("navigation", "https://wiki.test/Main", 0, error="connection refused"),
        event("navigation", "http://shop.test:7770/x", 404),  # an answer, however unwelcome
    ]
    assert unanswered_events(events, origins) == [
        "the site did not answer POST http://shop-2.test:7770/cart: status 503",
        "the site did not answer GET https://wiki.test/Main: connection refused",
    ]
    assert sites_answered_fields(events, origins) == {
        "sites_answered": False,
        "unanswered": {
            "count": 2,
            "first": "the site did not answer POST http://shop-2.test:7770/cart: status 503",
        },
    }
    assert sites_answered_fields(events[:3] + events[5:], origins) == {"sites_answered": True}


def test_a_trace_gives_the_summaries_of_the_statuses_asked_for_only() -> None:
    """What the finish reads (`NetworkTrace.summaries_with_status`): events and records alike, in order,
    each summarized as the trace route shows it."""
    trace = NetworkTrace()
    for status in (200, 0, 404, 502, 200):
        trace.append(NetworkEvent(method="GET", url=f"http://shop.test/{status}", status=status))
    record = NetworkEvent(method="POST", url="http://shop.test/cart", status=503)
    trace.append(tuple(getattr(record, name) for name in RECORD_FIELDS))  # a record, as a resumed journal's
    found = list(trace.summaries_with_status(UNREACHABLE_STATUSES))
    assert [(event["url"], event["status"]) for event in found] == [
        ("http://shop.test/0", 0),
        ("http://shop.test/502", 502),
        ("http://shop.test/cart", 503),
    ]
    assert found[0] == trace.summary(1) and found[2] == trace.summary(5)


def test_site_errors_count_every_failing_answer_to_a_mapped_site_and_list_the_first() -> None:
    origins = site_origins(SITES)
    events = [
        event("navigation", "http://shop.test:7770/", 500),
        event("asset", "http://shop.test:7770/app.js", 500),  # not judged
        event("navigation", "http://elsewhere.test/", 500),  # not a site of the map
        {**event("mutation", "http://shop-2.test:7770/cart", 502), "method": "POST"},
        event("navigation", "https://wiki.test/Main", 0, error="timed out"),
        event("navigation", "http://shop.test:7770/x", 404),  # an answer
        event("navigation", "http://shop.test:7770/y", 501),  # an answer too: not implemented
    ]
    assert site_errors_field(events, origins, listed=2) == {
        "count": 3,
        "origins": {"http://shop.test:7770": 1, "http://shop-2.test:7770": 1, "https://wiki.test:443": 1},
        "first": [
            {"method": "GET", "url": "http://shop.test:7770/", "status": 500},
            {"method": "POST", "url": "http://shop-2.test:7770/cart", "status": 502},
        ],
    }
    assert site_errors_field(events, origins)["first"][2] == {
        "method": "GET", "url": "https://wiki.test/Main", "status": 0, "error": "timed out"
    }  # fmt: skip
    assert site_errors_field(events[5:], origins) == {"count": 0, "origins": {}, "first": []}
    # a 500 is a failure but an answer: the site was up enough to say so
    assert sites_answered_fields(events[:1], origins) == {"sites_answered": True}


def test_faults_made_on_purpose_are_excused_one_for_one() -> None:
    origins = site_origins(SITES)
    events = [
        event("navigation", "http://shop.test:7770/a", 503),
        event("navigation", "http://shop.test:7770/a", 503),
        event("navigation", "http://shop.test:7770/b", 200),
        event("navigation", "http://shop.test:7770/b", 0, error="connection killed"),
    ]
    excused = [("GET", "http://shop.test:7770/a"), ("GET", "http://shop.test:7770/b")]
    kept = excuse(events, excused)
    assert kept == [events[1], events[2]]  # one /a excused; /b's excuse passes its answer for its failure
    assert site_errors_field(kept, origins)["count"] == 1
    assert excuse(events, []) == events
