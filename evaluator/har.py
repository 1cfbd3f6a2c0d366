"""HAR 1.2 import and export, and `load_trace` for every trace file format.

Import reads what Chrome DevTools, Playwright's `record_har` and mitmproxy's
`savehar` write: request headers and `postData.text`, response status,
headers, `cookies`, `content` and `redirectURL`. The reference evaluator reads
HAR content text as it is and never decodes `encoding: base64`; such content
is kept as no body at all, which judges the same and keeps binary out of memory.

Export (`trace_to_har`) writes a HAR the reference loads and judges exactly as
this project judged the trace, so a live session's `network.har` can be
re-scored by the official tooling.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from dateutil import parser as date_parser

from webarena_live.evaluator import __version__
from webarena_live.evaluator.errors import TraceFormatError
from webarena_live.evaluator.memo import BoundedMemo
from webarena_live.evaluator.trace import EventRecord, NetworkEvent, NetworkTrace

# The C string escaper `json` itself uses: ASCII output, lone surrogates written as \\uXXXX escapes.
_json_string = json.encoder.encode_basestring_ascii


class _EntryError(Exception):
    """A HAR entry lacks something every entry must have (turned into TraceFormatError with context)."""


def _pairs(items: Any, where: str) -> tuple[tuple[str, str], ...]:
    if items is None:
        return ()
    if not isinstance(items, list):
        raise _EntryError(f"{where} must be a list of {{name, value}} objects")
    pairs = []
    for item in items:
        if not isinstance(item, Mapping) or "name" not in item:
            raise _EntryError(f"{where} holds an item without a name: {item!r}")
        pairs.append((str(item["name"]), str(item.get("value", ""))))
    return tuple(pairs)


def _started(value: Any) -> float:
    if isinstance(value, int | float):
        return float(value)
    if not isinstance(value, str) or not value:
        return 0.0
    try:
        moment = date_parser.isoparse(value)
    except (ValueError, OverflowError):
        return 0.0
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def event_from_har_entry(entry: Mapping[str, Any]) -> NetworkEvent:
    """One HAR entry (or Playwright resource snapshot, which has the same shape) as an event.

    Raises TraceFormatError when the entry lacks the request method, URL,
    headers or the response status — fields the reference cannot do without.
    """
    try:
        return _event(entry)
    except _EntryError as error:
        raise TraceFormatError(str(error)) from None


def _event(entry: Mapping[str, Any]) -> NetworkEvent:
    if not isinstance(entry, Mapping):
        raise _EntryError(f"an entry must be an object, got {type(entry).__name__}")
    request, response = entry.get("request"), entry.get("response")
    if not isinstance(request, Mapping) or not isinstance(response, Mapping):
        raise _EntryError("an entry needs 'request' and 'response' objects")
    url, method = request.get("url"), request.get("method")
    if not isinstance(url, str) or not isinstance(method, str):
        raise _EntryError("request.url and request.method must be strings")
    if "headers" not in request:
        raise _EntryError(f"request.headers is missing for {url}")
    status = response.get("status")
    if isinstance(status, bool) or not isinstance(status, int | float | str):
        raise _EntryError(f"response.status is missing for {url}")
    try:
        status = int(status)
    except ValueError:
        raise _EntryError(f"response.status {status!r} is not a number for {url}") from None

    post = _mapping(request.get("postData"))
    content = _mapping(response.get("content"))
    body = content.get("text")
    if not isinstance(body, str) or content.get("encoding") == "base64":
        body = None
    cookies = response.get("cookies") or []
    error = entry.get("_error") or response.get("_error") or response.get("_failureText")
    return NetworkEvent(
        method=method,
        url=url,
        status=status,
        request_headers=_pairs(request.get("headers"), "request.headers"),
        post_data=post.get("text") if isinstance(post.get("text"), str) else None,
        post_data_mime=post.get("mimeType") if isinstance(post.get("mimeType"), str) else None,
        status_text=str(response.get("statusText") or ""),
        http_version=str(request.get("httpVersion") or "HTTP/1.1"),
        redirect_url=str(response.get("redirectURL") or ""),
        response_headers=_pairs(response.get("headers"), "response.headers"),
        response_cookies=_pairs(cookies, "response.cookies"),
        response_body=body,
        response_mime=content.get("mimeType") if isinstance(content.get("mimeType"), str) else None,
        started=_started(entry.get("startedDateTime")),
        duration_ms=float(entry.get("time") or 0.0) if isinstance(entry.get("time"), int | float) else 0.0,
        error=str(error) if error else None,
    )


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


def event_to_har_entry(event: NetworkEvent) -> dict[str, Any]:
    """A HAR 1.2 entry for `event` (round-trips through `event_from_har_entry`)."""
    request: dict[str, Any] = {
        "method": event.method,
        "url": event.url,
        "httpVersion": event.http_version,
        "cookies": [],
        "headers": _named(event.request_headers),
        "queryString": _named(parse_qsl(urlsplit(event.url).query, keep_blank_values=True)),
        "headersSize": -1,
        "bodySize": len(event.post_data.encode()) if event.post_data is not None else 0,
    }
    if event.post_data is not None:
        request["postData"] = {"mimeType": event.post_data_mime or "", "text": event.post_data}
    content: dict[str, Any] = {"size": 0, "mimeType": event.response_mime or ""}
    if event.response_body is not None:
        content["text"] = event.response_body
        content["size"] = len(event.response_body.encode())
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
            "headersSize": -1,
            "bodySize": content["size"],
        },
        "cache": {},
        "timings": {"send": 0, "wait": event.duration_ms, "receive": 0},
    }
    if event.error:
        entry["_error"] = event.error
    return entry


def _pair_to_json(pair: tuple[str, str]) -> str:
    return f'{{"name":{_json_string(pair[0])},"value":{_json_string(pair[1])}}}'


_pair_json: BoundedMemo[tuple[str, str], str] = BoundedMemo(_pair_to_json)
"""`{"name":…,"value":…}` text by header pair: most headers repeat on every request of a session."""


def _named_json(pairs: Iterable[tuple[str, str]]) -> str:
    # `map` over the memo's C-level lookup: no Python frame per pair.
    return "[" + ",".join(map(_pair_json.__getitem__, pairs)) + "]" if pairs else "[]"


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
     ) = event.record if isinstance(event, NetworkEvent) else event  # fmt: skip
    duration = _json_number(duration_ms)
    post_json = ""
    if post is not None:
        post_json = f',"postData":{{"mimeType":{_json_string(post_mime or "")},"text":{_json_string(post)}}}'
    size = len(body.encode()) if body is not None else 0
    content = f'{{"size":{size},"mimeType":{_json_string(response_mime or "")}'
    content += f',"text":{_json_string(body)}}}' if body is not None else "}"
    error_json = f',"_error":{_json_string(error)}' if error else ""
    return (
        f'{{"startedDateTime":"{_iso(started)}","time":{duration},'
        f'"request":{{"method":{_json_string(method)},"url":{_json_string(url)},'
        f'"httpVersion":{_json_string(http_version)},"cookies":[],'
        f'"headers":{_named_json(request_headers)},"queryString":{_query_string_json(url)},"headersSize":-1,'
        f'"bodySize":{len(post.encode()) if post is not None else 0}{post_json}}},'
        f'"response":{{"status":{int(status)},"statusText":{_json_string(status_text)},'
        f'"httpVersion":{_json_string(http_version)},"cookies":{_named_json(response_cookies)},'
        f'"headers":{_named_json(response_headers)},"content":{content},'
        f'"redirectURL":{_json_string(redirect_url)},"headersSize":-1,"bodySize":{size}}},'
        f'"cache":{{}},"timings":{{"send":0,"wait":{duration},"receive":0}}{error_json}}}'
    )


def _json_number(value: float) -> str:
    # What `json.dumps` writes for a number (its repr when finite), so both serializations agree.
    if type(value) is float and math.isfinite(value):
        return float.__repr__(value)
    return json.dumps(value)


def trace_to_har(trace: Iterable[NetworkEvent], *, creator: str = "webarena-live") -> dict[str, Any]:
    """The whole trace as a HAR 1.2 document."""
    return {
        "log": {
            "version": "1.2",
            "creator": {"name": creator, "version": __version__},
            "pages": [],
            "entries": [event_to_har_entry(event) for event in trace],
        }
    }


def events_from_entries(entries: Iterable[Any], *, source: str) -> NetworkTrace:
    """A trace from HAR entries or Playwright resource snapshots (`{"type": "resource-snapshot", ...}`)."""
    trace = NetworkTrace()
    for index, item in enumerate(entries):
        entry = item
        if isinstance(item, Mapping) and "type" in item:
            if item.get("type") != "resource-snapshot":
                continue
            entry = item.get("snapshot")
        try:
            trace.append(_event(entry))
        except _EntryError as error:
            raise TraceFormatError(f"{source}: entry {index}: {error}") from None
    return trace


def har_from_document(document: Any, *, source: str) -> NetworkTrace:
    """A trace from a parsed HAR document (or a bare list of entries)."""
    if isinstance(document, list):
        if not document:
            raise TraceFormatError(f"{source}: the trace holds no events")
        return events_from_entries(document, source=source)
    if not isinstance(document, Mapping) or not isinstance(document.get("log"), Mapping):
        raise TraceFormatError(f"{source}: not a HAR file (no 'log' object)")
    entries = document["log"].get("entries")
    if not isinstance(entries, list):
        raise TraceFormatError(f"{source}: not a HAR file (no 'log.entries' list)")
    if not entries:
        # The reference refuses such a file, so a verdict on it would not be comparable.
        raise TraceFormatError(f"{source}: the HAR file contains no entries")
    return events_from_entries(entries, source=source)


def load_journal(path: Path) -> NetworkTrace:
    """A `.jsonl` journal: one HAR entry (or resource snapshot) per line; blank lines skipped.

    A last line cut short by a crash is ignored; a broken line elsewhere is an error.
    """
    lines = path.read_text(encoding="utf-8").splitlines()
    items = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            items.append(json.loads(line))
        except ValueError as error:
            if number == len(lines):
                break
            raise TraceFormatError(f"{path}: line {number} is not JSON: {error}") from None
    return events_from_entries(items, source=str(path))


def load_trace(path: str | Path) -> NetworkTrace:
    """Read a trace file, whatever its format.

    - `.har` / `.json`: a HAR document (or a JSON list of entries);
    - `.zip`, a directory, or `trace.network`: a Playwright trace;
    - `.jsonl`: a journal of HAR entries, one per line.
    Raises TraceFormatError naming the file and the problem.
    """
    from webarena_live.evaluator.playwright_trace import load_playwright_trace

    file = Path(path)
    if not file.exists():
        raise TraceFormatError(f"{file}: trace file not found")
    try:
        if file.is_dir() or file.suffix == ".zip" or file.suffix == ".network":
            return load_playwright_trace(file)
        if file.suffix == ".jsonl":
            return load_journal(file)
        text = file.read_text(encoding="utf-8")
    except OSError as error:
        raise TraceFormatError(f"{file}: cannot read trace: {error.strerror or error}") from None
    except UnicodeDecodeError as error:
        raise TraceFormatError(f"{file}: trace is not UTF-8 text: {error}") from None
    try:
        document = json.loads(text)
    except ValueError:
        # Not one JSON document: maybe Playwright's line-per-event network log under another name.
        return load_playwright_trace(file)
    if isinstance(document, dict) and "log" not in document and "type" in document:
        return load_playwright_trace(file)  # a one-line Playwright network log
    return har_from_document(document, source=str(file))
