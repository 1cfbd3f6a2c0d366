"""The written `network.har` is a HAR 1.2 document with real sizes, as a HAR viewer needs it.

Real Chromium browses the test site (which gzips its JSON) through a real
`webarena-live serve`, recording its own HAR (Playwright `record_har`) at the
same time: for the same requests, body sizes (request `bodySize`, response
`bodySize` as transferred, `content.size` decoded) must be equal; header sizes
may differ a little (the browser and the proxy see slightly different header
sets). Both HARs, and what `trace_to_har` writes, must match the HAR 1.2
structure (a JSON schema of the specification's required fields and types).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from playwright.sync_api import Browser

from tests.site import agents
from tests.site.harness import FinishRecorder, ProxyProcess
from tests.site.live_fixtures import assert_verdict, run_task
from tests.site.server import RunningSite
from webarena_live.evaluator.har import (
    event_from_har_entry,
    event_to_har_entry,
    event_to_har_json,
    trace_to_har,
)
from webarena_live.evaluator.trace import NetworkEvent

pytest_plugins = ["tests.site.live_fixtures"]
pytestmark = pytest.mark.timeout(180)
CACHE_MODES = ("off",)
"""Sizes of exchanges that reached the network: every request goes out (no revalidation), and the first
one's figure in Chromium's HAR includes the proxy's 407 challenge (see below)."""

_PAIRS = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["name", "value"],
        "properties": {"name": {"type": "string"}, "value": {"type": "string"}},
    },
}
_SIZE = {"type": "integer", "minimum": -1}

HAR_1_2 = {
    "type": "object",
    "required": ["log"],
    "properties": {
        "log": {
            "type": "object",
            "required": ["version", "creator", "entries"],
            "properties": {
                "version": {"type": "string"},
                "creator": {
                    "type": "object",
                    "required": ["name", "version"],
                    "properties": {"name": {"type": "string"}, "version": {"type": "string"}},
                },
                "pages": {"type": "array"},
                "entries": {"type": "array", "items": {"$ref": "#/$defs/entry"}},
            },
        }
    },
    "$defs": {
        "entry": {
            "type": "object",
            "required": ["startedDateTime", "time", "request", "response", "cache", "timings"],
            "properties": {
                "startedDateTime": {"type": "string", "pattern": r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d"},
                "time": {"type": "number", "minimum": 0},
                "request": {
                    "type": "object",
                    "required": [
                        "method",
                        "url",
                        "httpVersion",
                        "cookies",
                        "headers",
                        "queryString",
                        "headersSize",
                        "bodySize",
                    ],
                    "properties": {
                        "method": {"type": "string"},
                        "url": {"type": "string"},
                        "httpVersion": {"type": "string"},
                        "cookies": {"type": "array"},
                        "headers": _PAIRS,
                        "queryString": _PAIRS,
                        "postData": {
                            "type": "object",
                            "required": ["mimeType"],
                            "properties": {"mimeType": {"type": "string"}, "text": {"type": "string"}},
                        },
                        "headersSize": _SIZE,
                        "bodySize": _SIZE,
                    },
                },
                "response": {
                    "type": "object",
                    "required": [
                        "status",
                        "statusText",
                        "httpVersion",
                        "cookies",
                        "headers",
                        "content",
                        "redirectURL",
                        "headersSize",
                        "bodySize",
                    ],
                    "properties": {
                        "status": {"type": "integer"},
                        "statusText": {"type": "string"},
                        "httpVersion": {"type": "string"},
                        "cookies": {"type": "array"},
                        "headers": _PAIRS,
                        "content": {
                            "type": "object",
                            "required": ["size", "mimeType"],
                            "properties": {
                                "size": {"type": "integer", "minimum": 0},
                                "mimeType": {"type": "string"},
                                "text": {"type": "string"},
                                "encoding": {"type": "string"},
                            },
                        },
                        "redirectURL": {"type": "string"},
                        "headersSize": _SIZE,
                        "bodySize": _SIZE,
                    },
                },
                "cache": {"type": "object"},
                "timings": {
                    "type": "object",
                    "required": ["send", "wait", "receive"],
                    "properties": {k: {"type": "number"} for k in ("send", "wait", "receive")},
                },
            },
        }
    },
}


def assert_har_1_2(document: Any) -> None:
    jsonschema.validate(document, HAR_1_2)


def _by_request(har: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """The last entry of each (method, URL) that got a response."""
    return {
        (e["request"]["method"], e["request"]["url"]): e
        for e in har["log"]["entries"]
        if e["response"]["status"]
    }


def test_written_har_has_real_sizes_equal_to_chromiums_own(
    live_proxy: ProxyProcess,
    live_browser: Browser,
    live_recorder: FinishRecorder,
    live_site: RunningSite,
    tmp_path: Path,
) -> None:
    browser_har = tmp_path / "chromium.har"

    def agent(page: Any) -> dict[str, Any]:
        answer = agents.read_stock(page, live_site.shop_http)  # gzipped JSON read by a script
        agents.add_lanterns_to_cart(page, live_site.shop_http)  # a JSON POST
        return answer

    result = run_task(
        live_proxy, live_browser, live_recorder, task_id=9006, session="sizes", agent=agent,
        record_har_path=str(browser_har), record_har_content="embed",
    )  # fmt: skip
    assert_verdict(result, "success", task_id=9006)
    ours = json.loads((live_proxy.output_dir / "9006" / "network.har").read_text())
    theirs = json.loads(browser_har.read_text())
    assert_har_1_2(ours)
    assert_har_1_2(theirs)

    mine, chromium = _by_request(ours), _by_request(theirs)
    shared = sorted(set(mine) & set(chromium))
    assert len(shared) >= 4, (sorted(mine), sorted(chromium))
    compared = []
    first = next(iter(_by_request({"log": {"entries": theirs["log"]["entries"][:1]}})))
    for key in shared:
        a, b = mine[key], chromium[key]
        assert a["request"]["bodySize"] == b["request"]["bodySize"], key
        if key == first:
            # Chromium counts the proxy's 407 challenge, answered before this request got through,
            # in this request's transfer: its figure is larger. Ours is what the site sent.
            length = {h["name"].lower(): h["value"] for h in b["response"]["headers"]}["content-length"]
            assert a["response"]["bodySize"] == int(length) < b["response"]["bodySize"], key
        else:
            assert a["response"]["bodySize"] == b["response"]["bodySize"], key
        assert a["response"]["content"]["size"] == b["response"]["content"]["size"], key
        assert (
            a["response"]["content"]["mimeType"].split(";")[0]
            == b["response"]["content"]["mimeType"].split(";")[0]
        )
        for side in ("request", "response"):
            ours_size, theirs_size = a[side]["headersSize"], b[side]["headersSize"]
            assert ours_size > 0, (key, side)
            if theirs_size > 0:
                assert abs(ours_size - theirs_size) < max(200, theirs_size // 2), (
                    key,
                    side,
                    ours_size,
                    theirs_size,
                )
        compared.append((key[0], key[1].removeprefix(live_site.shop_http), a["response"]["bodySize"],
                         a["response"]["content"]["size"]))  # fmt: skip
    print("\nsizes equal to Chromium's (method, path, bodySize, content.size):", compared)
    # Some body came compressed, and some bodies are kept as text for a viewer to show.
    assert any(body < size for _, _, body, size in compared if body > 0)
    texts = [e for e in ours["log"]["entries"] if "text" in e["response"]["content"]]
    assert texts and all(e["response"]["content"]["size"] > 0 for e in texts)


def test_exported_entries_are_har_1_2_and_keep_their_sizes_through_a_round_trip() -> None:
    event = NetworkEvent(
        "POST", "http://shop.test/api/cart?x=1#top", 201, (("Content-Type", "application/json"),),
        '{"qty": 2}', "application/json", "Created", "HTTP/1.1", "", (("Content-Type", "application/json"),),
        (), '{"ok": true}', "application/json", 1_700_000_000.5, 12.0, None, 10, 120, 30, 12,
    )  # fmt: skip
    entry = event_to_har_entry(event)
    assert json.loads(event_to_har_json(event)) == entry
    assert (entry["request"]["bodySize"], entry["response"]["headersSize"]) == (10, 120)
    assert (entry["response"]["bodySize"], entry["response"]["content"]["size"]) == (30, 12)
    # `POST /api/cart?x=1 HTTP/1.1` + CRLF, `Content-Type: application/json` + CRLF, blank line.
    assert entry["request"]["headersSize"] == len("POST /api/cart?x=1 HTTP/1.1\r\n") + 32 + 2
    assert event_from_har_entry(entry).record == event.record
    document = trace_to_har([event, NetworkEvent("GET", "http://shop.test/", 0, error="refused")])
    assert_har_1_2(document)
    failed = document["log"]["entries"][1]
    assert (failed["response"]["bodySize"], failed["response"]["content"]["size"]) == (-1, 0)


@pytest.mark.parametrize("coding", ["identity", "gzip", "br", "deflate", "zstd"])
def test_capture_measures_sizes_without_keeping_bodies(coding: str) -> None:
    """Real mitmproxy flows: the record has the body sizes as sent and received, decoded size included."""

    from tests.support.addon_helpers import make_flow
    from webarena_live.proxy.capture import record_from_flow

    picture = bytes(range(256)) * 400  # 100 KiB of image: measured, never kept
    headers = [(b"Content-Type", b"image/png")]
    if coding != "identity":
        headers.append((b"Content-Encoding", coding.encode()))
    # mitmproxy encodes the body as its Content-Encoding says, as a server would have sent it.
    flow = make_flow("POST", "http://shop.test/upload", body=b"a=1&b=2", response_headers=headers,
                     response_body=picture)  # fmt: skip
    assert flow.response is not None and flow.response.raw_content is not None
    raw = flow.response.raw_content
    assert (raw == picture) == (coding == "identity")
    fields = flow.response.data.headers.fields
    event = NetworkEvent(*record_from_flow(flow))
    assert event.response_body is None  # an image: nothing kept
    status_line = len("HTTP/1.1 200 OK\r\n")
    header_lines = sum(len(n) + len(v) + 4 for n, v in fields)
    assert event.request_body_size == 7
    assert event.response_headers_size == status_line + header_lines + 2
    assert (event.response_body_size, event.content_size) == (len(raw), len(picture))
    entry = json.loads(event_to_har_json(event))
    assert entry["response"]["bodySize"] == len(raw) and entry["response"]["content"]["size"] == len(picture)


def test_a_failed_flow_has_a_request_size_and_no_response_sizes() -> None:
    from tests.support.addon_helpers import make_flow
    from webarena_live.proxy.capture import record_from_flow

    event = NetworkEvent(*record_from_flow(make_flow("POST", "http://shop.test/x", body=b"abc", status=None,
                                                     error="connection refused")))  # fmt: skip
    assert (event.request_body_size, event.response_headers_size, event.response_body_size) == (3, -1, -1)
