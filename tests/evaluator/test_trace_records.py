"""Traces of records: what the live proxy keeps per event, and the fast paths around it.

Each fast path is held to the plain definition it replaces, on real
mitmproxy flows and on generated inputs: a trace of records classifies,
counts and searches exactly as a trace of event objects does, a record
serializes to the same HAR entry as its event, and the garbage collector
really stops tracking records (the reason they exist).
"""

from __future__ import annotations

import gc
import json
from urllib.parse import parse_qsl, urlsplit

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.addon_helpers import SHOP, browser_headers, make_flow
from webarena_live.evaluator.har import _query_string_json, event_to_har_entry, event_to_har_json
from webarena_live.evaluator.memo import BoundedMemo
from webarena_live.evaluator.trace import RECORD_FIELDS, EventType, NetworkEvent, NetworkTrace
from webarena_live.proxy.capture import event_from_flow, record_from_flow
from webarena_live.proxy.credentials import take_credentials

ASSET = (("Accept", "*/*"), ("Sec-Fetch-Dest", "script"), ("Sec-Fetch-Mode", "no-cors"))
PAGE = (("Accept", "text/html"), ("Sec-Fetch-Dest", "document"), ("Sec-Fetch-Mode", "navigate"))
CLICK = (*PAGE, ("Sec-Fetch-User", "?1"))
XHR = (("Accept", "application/json"), ("Sec-Fetch-Dest", "empty"), ("Sec-Fetch-Mode", "cors"))
NO_FETCH = (("Accept", "text/html,*/*"),)

events = st.builds(
    NetworkEvent,
    method=st.sampled_from(["GET", "POST", "PUT", "DELETE", "HEAD", "get"]),
    url=st.sampled_from(["/", "/a.js", "/p?x=1", "/logo.png", "/api/v1/items", "/style.css?v=2"]).map(
        lambda path: SHOP + path
    ),
    status=st.sampled_from([200, 302, 404, 0]),
    request_headers=st.sampled_from([ASSET, PAGE, CLICK, XHR, NO_FETCH, ()]),
    post_data=st.none() | st.just("a=1"),
)


def _plain_views(items: list[NetworkEvent]) -> tuple[list[str], list[str], dict[str, int]]:
    """Evaluation and navigation event URLs and counts, by the plain definitions."""
    evaluation = [e for e in items if e.is_evaluation]
    navigation = [e for e in evaluation if e.is_navigation]
    counts = {kind.value: sum(e.event_type is kind for e in items) for kind in EventType}
    return [e.url for e in evaluation], [e.url for e in navigation], {**counts, "total": len(items)}


@settings(max_examples=200, deadline=None)
@given(st.lists(events, max_size=30), st.lists(st.booleans(), min_size=30, max_size=30), st.integers(0, 30))
def test_a_trace_of_records_reads_like_a_trace_of_events(items, as_record, split):
    trace = NetworkTrace()
    for index, event in enumerate(items[:split]):
        trace.append(event.record if as_record[index] else event)
    trace.counts()  # classified half-way through, then grown: the views catch up
    for index, event in enumerate(items[split:], split):
        trace.append(event.record if as_record[index] else event)
    evaluation, navigation, counts = _plain_views(items)
    assert [e.url for e in trace.evaluation_events] == evaluation
    assert [e.url for e in trace.navigation_events] == navigation
    assert trace.counts() == counts
    last = trace.last_navigation()
    assert (last.url if last else None) == (navigation[-1] if navigation else None)
    assert [e.url for e in trace.first_evaluation_events(2)] == evaluation[:2]
    assert [(e.method, e.url, e.status) for e in trace] == [(e.method, e.url, e.status) for e in items]
    # The event stream's view, from the trace's own classification, is each event's own summary.
    assert [trace.summary(index) for index in range(len(items))] == [e.summary() for e in items]
    posts = trace.find(0, "POST", lambda event: event.post_data is not None)
    assert [e.url for e in posts] == [
        e.url for e in items if e.is_evaluation and e.method == "POST" and e.post_data
    ]


def test_found_and_read_events_are_kept_and_iteration_keeps_nothing():
    records = [NetworkEvent("GET", f"{SHOP}/{n}", 200, PAGE).record for n in range(3)]
    trace = NetworkTrace(records)
    assert [e.url for e in trace] == [f"{SHOP}/{n}" for n in range(3)]
    assert all(type(item) is tuple for item in trace._items)  # iteration made objects for the caller only
    first = trace.event(0)
    assert trace.event(0) is first  # kept: evaluators memoize on it
    (found,) = trace.find(1, "GET", lambda event: event.url.endswith("/2"))
    assert trace.event(2) is found and type(trace._items[1]) is tuple


def test_a_record_is_the_events_constructor_fields_and_serializes_the_same():
    flow = make_flow(
        "POST",
        f"{SHOP}/cart?x=1",
        headers={"Content-Type": "application/x-www-form-urlencoded", "Cookie": "sid=1"},
        body=b"sku=A7&qty=2",
        status=302,
        response_headers={"Location": "/cart", "Set-Cookie": "cart=7; Path=/"},
    )
    record = record_from_flow(flow)
    event = event_from_flow(flow)
    assert len(record) == len(RECORD_FIELDS) and record == event.record
    assert NetworkEvent(*record).record == record
    assert event_to_har_json(record) == event_to_har_json(event)
    assert json.loads(event_to_har_json(record)) == event_to_har_entry(event)


def test_the_garbage_collector_stops_tracking_records():
    flows = [make_flow(url=f"{SHOP}/p/{n}?q={n}", headers=browser_headers(navigate=True)) for n in range(50)]
    trace = NetworkTrace(record_from_flow(flow) for flow in flows)
    gc.collect()
    gc.collect()  # a tuple is untracked once the collector sees its items untracked
    assert not any(gc.is_tracked(item) for item in trace._items)


@settings(max_examples=500, deadline=None)
@given(
    st.text(alphabet="ab=&?#%+ \t\r\n/;é", max_size=24),
    st.sampled_from(["http://shop.test/p", "https://h:8443/a/b", "http://h", "http://h?"]),
)
def test_the_query_string_fast_path_equals_urlsplit_and_parse_qsl(tail, base):
    url = base + tail
    expected = [{"name": n, "value": v} for n, v in parse_qsl(urlsplit(url).query, keep_blank_values=True)]
    assert json.loads(_query_string_json(url)) == expected


header_pairs = st.tuples(
    st.sampled_from(["Accept", "Cookie", "Referer", "X-Ünï", "Sec-Fetch-Dest"]),
    st.text(alphabet='ab=;/é\udcff"\\ ', max_size=12),  # a lone surrogate: an undecodable header byte
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(header_pairs, max_size=6), min_size=1, max_size=4), st.booleans())
def test_header_lists_sent_again_serialize_as_the_entry_says(header_lists, as_list):
    # The journal line's header block is remembered by the whole header tuple: sent again (a page's
    # every request), in another order or as a list, it is still what `event_to_har_entry` writes.
    for headers in [*header_lists, *header_lists, *reversed(header_lists)]:
        sent = list(headers) if as_list else tuple(headers)
        event = NetworkEvent("GET", f"{SHOP}/p?a=1", 200, sent)  # type: ignore[arg-type]
        entry = event_to_har_entry(event)
        assert json.loads(event_to_har_json(event)) == entry
        assert json.loads(event_to_har_json(event.record)) == entry


def test_a_bounded_memo_computes_once_and_forgets_past_its_limit():
    calls = []
    memo = BoundedMemo(lambda key: calls.append(key) or key * 2, limit=3)
    assert [memo[1], memo[1], memo[2]] == [2, 2, 4] and calls == [1, 2]
    for key in range(10):
        assert memo[key] == key * 2
        assert len(memo) <= 3


def test_credentials_sent_twice_are_both_taken_off():
    auth = "Basic YWxpY2U6eA=="  # alice:x
    flow = make_flow(headers={"Proxy-Authorization": auth, "Accept": "*/*"})
    flow.request.headers.add("proxy-authorization", "Basic Ym9iOng=")  # bob:x
    assert take_credentials(flow.request) == ("alice", None)
    assert not [name for name, _ in flow.request.headers.fields if name.lower() == b"proxy-authorization"]
    assert flow.request.headers["Accept"] == "*/*"
    assert take_credentials(flow.request) == (None, None)
