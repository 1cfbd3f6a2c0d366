"""Capture: real mitmproxy flows in, `NetworkEvent`s out (classification, body policy, cookies, failures)."""

from __future__ import annotations

import gzip
import json

from tests.support.addon_helpers import SHOP, browser_headers, make_flow
from webarena_live.evaluator.trace import EventType
from webarena_live.proxy import capture
from webarena_live.proxy.capture import event_from_flow, keeps_response_body, shrink_multipart

JSON = {"Content-Type": "application/json; charset=utf-8"}


def test_link_click_is_a_navigation_the_reference_counts():
    event = event_from_flow(make_flow(url=f"{SHOP}/products/7", headers=browser_headers(navigate=True)))
    assert event.event_type is EventType.NAVIGATION
    assert event.is_navigation
    assert event.method == "GET" and event.url == f"{SHOP}/products/7" and event.status == 200


def test_fetch_is_other_and_not_a_navigation():
    event = event_from_flow(make_flow(url=f"{SHOP}/api/cart", headers=browser_headers(navigate=False)))
    assert event.event_type is EventType.OTHER
    assert not event.is_navigation


def test_accept_fallback_for_clients_without_sec_fetch_headers():
    page = event_from_flow(make_flow(headers={"Accept": "text/html,*/*"}))
    data = event_from_flow(make_flow(headers={"Accept": "application/json"}))
    bare = event_from_flow(make_flow(headers={}))
    assert page.event_type is EventType.NAVIGATION and page.is_navigation
    assert data.event_type is EventType.OTHER and not data.is_navigation
    assert bare.event_type is EventType.OTHER


def test_form_post_is_a_mutation_with_its_post_data_and_mime():
    form = {"Content-Type": "application/x-www-form-urlencoded", **browser_headers(navigate=True)}
    flow = make_flow("POST", f"{SHOP}/cart/add", headers=form, body=b"sku=A7&qty=2", status=302,
                     response_headers={"Location": "/cart"})  # fmt: skip
    event = event_from_flow(flow)
    assert event.event_type is EventType.MUTATION
    assert event.post_data == "sku=A7&qty=2"
    assert event.post_data_mime == "application/x-www-form-urlencoded"
    assert event.status == 302
    assert event.redirect_url == f"{SHOP}/cart"  # a relative Location, resolved like a browser's HAR


def test_a_location_no_url_parser_reads_is_kept_as_sent():
    flow = make_flow(status=302, response_headers={"Location": "http://[bad/"})  # urljoin: "Invalid IPv6 URL"
    assert event_from_flow(flow).redirect_url == "http://[bad/"


def test_proxy_credentials_never_reach_the_event():
    flow = make_flow(headers={"Proxy-Authorization": "Basic YWxpY2U6eA==", "Accept": "text/html"})
    names = [name.lower() for name, _ in event_from_flow(flow).request_headers]
    assert "proxy-authorization" not in names and "accept" in names


def test_json_response_body_is_kept_and_gzip_decoded():
    body = gzip.compress(json.dumps({"cart": {"items": 2}}).encode())
    flow = make_flow(url=f"{SHOP}/api/cart", response_headers={**JSON, "Content-Encoding": "gzip"})
    assert flow.response is not None
    flow.response.raw_content = body  # as received: still compressed
    event = event_from_flow(flow)
    assert json.loads(event.response_body or "") == {"cart": {"items": 2}}
    assert event.response_mime == "application/json; charset=utf-8"


def test_html_and_static_asset_bodies_are_not_kept():
    page = make_flow(response_headers={"Content-Type": "text/html"}, response_body=b"<html>hi</html>")
    script = make_flow(url=f"{SHOP}/app.js?v=3", response_headers=JSON, response_body=b"{}")
    assert event_from_flow(page).response_body is None
    assert event_from_flow(page).response_mime == "text/html"
    assert event_from_flow(script).response_body is None
    assert not event_from_flow(script).is_evaluation


def test_policy_names_the_types_the_reference_parses():
    assert keeps_response_body("application/json", "/api")
    assert keeps_response_body("application/vnd.api+json", "/api")
    assert keeps_response_body("application/x-www-form-urlencoded", "/echo")
    assert not keeps_response_body("text/html; charset=utf-8", "/")
    assert not keeps_response_body("image/png", "/logo")
    assert not keeps_response_body(None, "/")
    assert not keeps_response_body("application/json", "/data.json.css")


def test_streamed_and_oversized_bodies_are_not_kept():
    streamed = make_flow(response_headers=JSON, response_body=b'{"a": 1}')
    assert streamed.response is not None
    streamed.response.stream = True
    big = make_flow(response_headers=JSON, response_body=b'{"a": "' + b"x" * 300_000 + b'"}')
    assert event_from_flow(streamed).response_body is None
    assert event_from_flow(big).response_body is None
    assert event_from_flow(big, body_cap=400_000).response_body is not None


def test_undecodable_bodies_do_not_break_capture():
    broken_gzip = make_flow("POST", headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
                            response_headers=JSON, response_body=b"\xff\xfe{")  # fmt: skip
    broken_gzip.request.raw_content = b"\x1f\x8bnot gzip"  # claims gzip, is not
    unknown_charset = {"Content-Type": "text/plain; charset=no-such-charset"}
    latin = make_flow("POST", headers=unknown_charset, body=b"caf\xe9")
    event = event_from_flow(broken_gzip)
    assert event.post_data is not None and "not gzip" in event.post_data  # kept as received
    assert event.response_body is not None
    assert "\ufffd" in event.response_body  # invalid UTF-8 became replacement characters
    assert event_from_flow(latin).post_data == "caf\udce9"  # an unknown charset: the byte is kept


def test_large_multipart_upload_keeps_its_form_fields():
    boundary = "----form7"
    upload = b"\x89PNG" + b"\x00" * 400_000
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="title"\r\n\r\nMy review\r\n'
        f'--{boundary}\r\nContent-Disposition: form-data; name="photo"; filename="p.png"\r\n'
        f"Content-Type: image/png\r\n\r\n"
    )
    tail = f'\r\n--{boundary}\r\nContent-Disposition: form-data; name="rating"\r\n\r\n5\r\n--{boundary}--\r\n'
    body = head.encode() + upload + tail.encode()
    mime = f"multipart/form-data; boundary={boundary}"
    event = event_from_flow(make_flow("POST", f"{SHOP}/review", headers={"Content-Type": mime}, body=body))
    assert event.post_data is not None
    assert len(event.post_data) < 10_000
    assert "My review" in event.post_data and 'name="rating"\r\n\r\n5' in event.post_data
    assert 'filename="p.png"' in event.post_data
    assert event.post_data_mime == mime


def test_shrink_multipart_without_boundary_gives_up():
    assert shrink_multipart(b"--x\r\n\r\nbody", "multipart/form-data") is None


def test_oversized_json_post_is_dropped_but_its_mime_kept():
    body = json.dumps({"blob": "y" * 300_000}).encode()
    event = event_from_flow(make_flow("POST", headers={"Content-Type": "application/json"}, body=body))
    assert event.post_data is None and event.post_data_mime == "application/json"


def test_response_cookies_are_name_value_pairs_as_sent():
    headers = [
        (b"Set-Cookie", b"session=abc%20def; Path=/; HttpOnly"),
        (b"Set-Cookie", b"cart=7; Max-Age=60"),
        (b"Content-Type", b"text/html"),
        (b"X-Frame-Options", b"DENY"),
    ]
    event = event_from_flow(make_flow(response_headers=headers))
    assert event.response_cookies == (("session", "abc%20def"), ("cart", "7"))
    kept = {name.lower() for name, _ in event.response_headers}
    assert kept == {"set-cookie", "content-type"}  # only the headers that matter are kept


def test_failed_flow_is_an_event_with_status_zero_and_the_error():
    flow = make_flow(url=f"{SHOP}/down", headers=browser_headers(navigate=True), status=None,
                     error="Connection refused")  # fmt: skip
    event = event_from_flow(flow)
    assert event.status == 0
    assert event.error == "Connection refused"
    assert event.url == f"{SHOP}/down"
    assert event.duration_ms > 0


def test_timestamps_and_protocol_are_recorded():
    event = event_from_flow(make_flow(response_headers=JSON, response_body=b"{}"))
    assert event.started == 1_700_000_000.0
    assert 49 < event.duration_ms < 51
    assert event.http_version == "HTTP/1.1"
    assert event.status_text == "OK"


def test_body_cap_default_is_256_kib():
    assert capture.BODY_CAP == 256 * 1024


def test_the_label_says_navigation_exactly_when_the_reference_counts_one() -> None:
    """A Node `fetch` (undici) of a page: `sec-fetch-mode: cors`, an Accept of text/html, no
    `sec-fetch-user`. The reference counts it as a navigation, so the label says so too; and for every
    combination of the headers that matter the two never disagree."""
    from itertools import product

    from webarena_live.evaluator.classify import EventType, classify, counts_as_navigation

    undici = {"sec-fetch-mode": "cors", "sec-fetch-dest": "empty", "accept": "text/html"}
    assert counts_as_navigation("GET", undici) and classify("GET", undici) is EventType.NAVIGATION
    values = {
        "sec-fetch-dest": (None, "document", "empty", "iframe"),
        "sec-fetch-mode": (None, "navigate", "cors", "no-cors"),
        "sec-fetch-user": (None, "?1"),
        "accept": (None, "text/html,application/xhtml+xml", "*/*", "application/json, text/html"),
    }
    for method in ("GET", "HEAD", "POST"):
        for combination in product(*values.values()):
            headers = {
                name: value for name, value in zip(values, combination, strict=True) if value is not None
            }
            label = classify(method, headers)
            if method == "POST":
                assert label is EventType.MUTATION
            else:
                assert (label is EventType.NAVIGATION) == counts_as_navigation(method, headers), headers
