"""HAR 1.2 export; reading traces (`load_trace`, `event_from_har_entry`) lives in `har_import`.

Export (`trace_to_har`) writes a HAR the reference loads and judges exactly as
this project judged the trace, so a live session's `network.har` can be
re-scored by the official tooling.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from webarena_live.evaluator import __version__
from webarena_live.evaluator.har_import import (
    event_from_har_entry,
    events_from_entries,
    har_from_document,
    load_journal,
    load_trace,
)
from webarena_live.evaluator.memo import BoundedMemo
from webarena_live.evaluator.trace import EventRecord, NetworkEvent, as_event

# The C string escaper `json` itself uses: ASCII output, lone surrogates written as \\uXXXX escapes.
_json_string = json.encoder.encode_basestring_ascii


def _iso_reference(epoch: float) -> str:
    """The HAR timestamp of `epoch` by the book (`datetime`); `_iso` must always agree with it."""
    return datetime.fromtimestamp(epoch, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


_second_prefix: tuple[float, str] = (math.nan, "")
"""The last whole second `_iso` formatted: events come in time order, so most share it."""


def _iso(epoch: float) -> str:
    """`2024-05-01T12:00:00.123Z` for `epoch`, as `_iso_reference` writes it, at a fraction of the cost.

    It runs for every captured event (journal lines), so the whole-second part
    is reused from the previous call; the split into second and microsecond
    rounds exactly as `datetime.fromtimestamp` does (half to even).
    """
    global _second_prefix
    if not math.isfinite(epoch):
        return _iso_reference(epoch)
    fraction, whole = math.modf(epoch)
    micro = round(fraction * 1e6)
    if micro >= 1_000_000:
        whole, micro = whole + 1, micro - 1_000_000
    elif micro < 0:
        whole, micro = whole - 1, micro + 1_000_000
    if _second_prefix[0] != whole:
        try:
            prefix = datetime.fromtimestamp(whole, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")
        except (OverflowError, OSError, ValueError):
            return _iso_reference(epoch)
        _second_prefix = (whole, prefix)
    return f"{_second_prefix[1]}.{micro // 1000:03d}Z"


def _named(pairs: Iterable[tuple[str, str]]) -> list[dict[str, str]]:
    return [{"name": name, "value": value} for name, value in pairs]


def _text_size(text: str) -> int:
    """Bytes of `text` as sent (lone surrogates stand for the undecodable bytes they keep)."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogateescape"))


def _pair_size(pair: tuple[str, str]) -> int:
    return _text_size(pair[0]) + _text_size(pair[1]) + 4  # `name: value` and CRLF


_pair_sizes: BoundedMemo[tuple[str, str], int] = BoundedMemo(_pair_size)
"""Bytes of a header line by header pair (the pairs repeat, as for `_pair_json`)."""


def _header_lines(headers: Iterable[tuple[str, str]]) -> int:
    """Bytes of a line per header (`name: value` and CRLF)."""
    return sum(map(_pair_sizes.__getitem__, headers))


def _request_headers_size(method: str, url: str, http_version: str, header_lines: int) -> int:
    """Bytes of the request line (`GET /path?query HTTP/1.1`), the header lines and the blank line."""
    authority = url.find("//")
    slash = url.find("/", authority + 2) if authority >= 0 else -1
    if slash < 0:
        target = 1  # `/`
    else:
        fragment = url.find("#", slash)
        end = fragment if fragment >= 0 else len(url)
        target = end - slash if url.isascii() else _text_size(url[slash:end])
    return len(method) + target + len(http_version) + 4 + header_lines + 2


def _sizes(
    method: str,
    url: str,
    http_version: str,
    header_lines: int,
    post: str | None,
    body: str | None,
    request_body_size: int,
    response_headers_size: int,
    response_body_size: int,
    content_size: int,
) -> tuple[int, int, int, int]:
    """(request headersSize, request bodySize, response bodySize, content.size) of an event.

    Sizes the capture measured win; a trace that did not say falls back on the
    kept text (-1 for a response body nobody knows).
    """
    if request_body_size < 0:
        request_body_size = 0 if post is None else _text_size(post)
    if content_size < 0:
        content_size = _text_size(body) if body is not None else 0
    if response_body_size < 0 and body is not None:
        response_body_size = content_size
    headers_size = _request_headers_size(method, url, http_version, header_lines)
    return headers_size, request_body_size, response_body_size, content_size


def event_to_har_entry(event: NetworkEvent | EventRecord) -> dict[str, Any]:
    """A HAR 1.2 entry for `event` or its record (round-trips through `event_from_har_entry`).

    Sizes are the real ones where the capture measured them (request and
    response `headersSize` and `bodySize`, `content.size`), so HAR viewers show
    them; `content.text` is the body the event kept (text, size-capped). It is
    never written base64: the reference does not decode base64 content, and
    the event keeps text bodies only.
    """
    event = as_event(event)
    request_headers_size, request_body_size, response_body_size, content_size = _sizes(
        event.method, event.url, event.http_version, _header_lines(event.request_headers), event.post_data,
        event.response_body, event.request_body_size, event.response_headers_size,
        event.response_body_size, event.content_size,
    )  # fmt: skip
    request: dict[str, Any] = {
        "method": event.method,
        "url": event.url,
        "httpVersion": event.http_version,
        "cookies": [],
        "headers": _named(event.request_headers),
        "queryString": _named(parse_qsl(urlsplit(event.url).query, keep_blank_values=True)),
        "headersSize": request_headers_size,
        "bodySize": request_body_size,
    }
    if event.post_data is not None:
        request["postData"] = {"mimeType": event.post_data_mime or "", "text": event.post_data}
    content: dict[str, Any] = {"size": content_size, "mimeType": event.response_mime or ""}
    if event.response_body is not None:
        content["text"] = event.response_body
    entry: dict[str, Any] = {
        "startedDateTime": _iso(event.started),
        "time": event.duration_ms,
        "request": request,
        "response": {
            "status": event.status,
            "statusText": event.status_text,
            "httpVersion": event.http_version,
            "cookies": _named(event.response_cookies),
            "headers": _named(event.response_headers),
            "content": content,
            "redirectURL": event.redirect_url,
            "headersSize": event.response_headers_size,
            "bodySize": response_body_size,
            **({"_wire": _wire(event.wire)} if event.wire else {}),
        },
        "cache": {},
        "timings": {"send": 0, "wait": event.duration_ms, "receive": 0},
    }
    if event.error:
        entry["_error"] = event.error
    return entry


def _wire(wire: tuple[int, str]) -> dict[str, Any]:
    """What the wire carried where the browser saw another exchange (`evaluator/revalidation.py`)."""
    return {"status": wire[0], "statusText": wire[1]}


def _pair_to_json(pair: tuple[str, str]) -> str:
    return f'{{"name":{_json_string(pair[0])},"value":{_json_string(pair[1])}}}'


_pair_json: BoundedMemo[tuple[str, str], str] = BoundedMemo(_pair_to_json)
"""`{"name":…,"value":…}` text by header pair: most headers repeat on every request of a session."""


def _named_json(pairs: Iterable[tuple[str, str]]) -> str:
    # `map` over the memo's C-level lookup: no Python frame per pair.
    return "[" + ",".join(map(_pair_json.__getitem__, pairs)) + "]" if pairs else "[]"


def _header_block(headers: Iterable[tuple[str, str]]) -> tuple[str, int]:
    return _named_json(headers), _header_lines(headers)


_header_blocks: BoundedMemo[tuple[tuple[str, str], ...], tuple[str, int]] = BoundedMemo(
    _header_block, limit=1024
)
"""(HAR `headers` text, bytes of their lines) by a request's whole header tuple: a page's requests
(its assets, its API calls) send the same headers, so most events take both in one lookup."""


def _request_header_block(headers: Iterable[tuple[str, str]]) -> tuple[str, int]:
    return _header_blocks[headers] if type(headers) is tuple else _header_block(headers)


_query_json: BoundedMemo[str, str] = BoundedMemo(
    lambda query: _named_json(parse_qsl(query, keep_blank_values=True))
)
"""HAR `queryString` text by query string: pages, polls and assets repeat theirs."""

_URL_STRIPPED = frozenset("\t\r\n")
"""Characters `urlsplit` deletes from a URL before splitting it."""


def _query_string_json(url: str) -> str:
    """`_named(parse_qsl(urlsplit(url).query, keep_blank_values=True))` as JSON text, memoized.

    The query of an absolute URL is what lies between the first `?` and the
    first `#` (a `#` first means there is none), exactly as `urlsplit` finds
    it once its deleted characters are out of the way.
    """
    if "?" not in url:
        return "[]"
    if not _URL_STRIPPED.isdisjoint(url):
        return _named_json(parse_qsl(urlsplit(url).query, keep_blank_values=True))
    return _query_json[url.partition("#")[0].partition("?")[2]]


def event_to_har_json(event: NetworkEvent | EventRecord) -> str:
    """`event_to_har_entry(event)` as compact, ASCII-only JSON text, several times faster.

    The live proxy journals every event as it completes, so this is on its
    per-flow path: the text is assembled directly with the C string escaper of
    `json` instead of building the dict and walking it, from the event or from
    its record (what the proxy keeps). `json.loads` of the result equals
    `event_to_har_entry(event)` (the tests hold it to that).
    """
    (method, url, status, request_headers, post, post_mime, status_text, http_version, redirect_url,
     response_headers, response_cookies, body, response_mime, started, duration_ms, error,
     request_body_size, response_headers_size, response_body_size, content_size, wire,
     ) = event.record if isinstance(event, NetworkEvent) else event  # fmt: skip
    headers_json, header_lines = _request_header_block(request_headers)
    request_headers_size, request_body_size, response_body_size, content_size = _sizes(
        method, url, http_version, header_lines, post, body,
        request_body_size, response_headers_size, response_body_size, content_size,
    )  # fmt: skip
    duration = _json_number(duration_ms)
    post_json = ""
    if post is not None:
        post_json = f',"postData":{{"mimeType":{_json_string(post_mime or "")},"text":{_json_string(post)}}}'
    content = f'{{"size":{content_size},"mimeType":{_json_string(response_mime or "")}'
    content += f',"text":{_json_string(body)}}}' if body is not None else "}"
    error_json = f',"_error":{_json_string(error)}' if error else ""
    wire_json = f',"_wire":{{"status":{int(wire[0])},"statusText":{_json_string(wire[1])}}}' if wire else ""
    return (
        f'{{"startedDateTime":"{_iso(started)}","time":{duration},'
        f'"request":{{"method":{_json_string(method)},"url":{_json_string(url)},'
        f'"httpVersion":{_json_string(http_version)},"cookies":[],'
        f'"headers":{headers_json},"queryString":{_query_string_json(url)},'
        f'"headersSize":{request_headers_size},"bodySize":{request_body_size}{post_json}}},'
        f'"response":{{"status":{int(status)},"statusText":{_json_string(status_text)},'
        f'"httpVersion":{_json_string(http_version)},"cookies":{_named_json(response_cookies)},'
        f'"headers":{_named_json(response_headers)},"content":{content},'
        f'"redirectURL":{_json_string(redirect_url)},"headersSize":{int(response_headers_size)},'
        f'"bodySize":{response_body_size}{wire_json}}},'
        f'"cache":{{}},"timings":{{"send":0,"wait":{duration},"receive":0}}{error_json}}}'
    )


def _json_number(value: float) -> str:
    # What `json.dumps` writes for a number (its repr when finite), so both serializations agree.
    if type(value) is float and math.isfinite(value):
        return float.__repr__(value)
    return json.dumps(value)


def _log_fields(creator: str) -> dict[str, Any]:
    """A HAR document's `log`, but for its entries (which come last)."""
    return {"version": "1.2", "creator": {"name": creator, "version": __version__}, "pages": []}


def trace_to_har(trace: Iterable[NetworkEvent], *, creator: str = "webarena-live") -> dict[str, Any]:
    """The whole trace as a HAR 1.2 document."""
    return {"log": {**_log_fields(creator), "entries": [event_to_har_entry(event) for event in trace]}}


def har_head(creator: str = "webarena-live") -> str:
    """The text of `trace_to_har`'s document before its first entry, for writers that append each
    entry's text (`event_to_har_json`, joined by ",\n") and close it with `HAR_TAIL`."""
    fields = json.dumps(_log_fields(creator), separators=(",", ":"))
    return '{"log":' + fields[:-1] + ',"entries":['


HAR_TAIL = "\n]}}\n"


__all__ = [
    "HAR_TAIL",
    "event_from_har_entry",
    "event_to_har_entry",
    "event_to_har_json",
    "events_from_entries",
    "har_from_document",
    "har_head",
    "load_journal",
    "load_trace",
    "trace_to_har",
]
