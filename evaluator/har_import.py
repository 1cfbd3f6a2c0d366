"""Reading traces: HAR entries (and Playwright resource snapshots) as events, and `load_trace`.

Import reads what Chrome DevTools, Playwright's `record_har` and mitmproxy's
`savehar` write: request headers and `postData.text`, response status,
headers, `cookies`, `content` and `redirectURL`. The reference evaluator reads
HAR content text as it is and never decodes `encoding: base64`; such content
is kept as no body at all, which judges the same and keeps binary out of memory.

Entries are read as leniently as the reference reads them: it
wraps each entry as it is and reads a field only when an evaluator needs it,
so a field that is missing or of the wrong type is no reason to refuse the
file. Such a field is recorded as a defect of its event
(`evaluator/trace_defects.py`) and becomes an error only where the reference
would read it. What the reference cannot load at all (no `log.entries`, no
entries, an entry that is a number) is refused here too.

One rule is the browser's rather than the reference's: a HAR recorded on the
wire (mitmproxy's `savehar`, any proxy, a journal) holds a `304` where the
browser revalidated its cached page, while the browser's own HAR, which the
official pipeline judges, holds the page it showed. Such an entry is read as
the browser recorded it (`evaluator/revalidation.py`), its wire status kept in
the event's `wire`; a browser's own HAR (`log.creator`) is read as it is.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from datetime import UTC
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from dateutil import parser as date_parser

from webarena_live.evaluator import trace_defects as defect
from webarena_live.evaluator.errors import TraceFormatError
from webarena_live.evaluator.revalidation import Revalidations
from webarena_live.evaluator.trace import NetworkEvent, NetworkTrace


class _EntryError(Exception):
    """An entry the reference cannot even load (turned into TraceFormatError with context)."""


_SUBSCRIPTABLE = (Mapping, list, str)
"""Containers whose emptiness the reference reads as "nothing" (it iterates them)."""

_INTEGRAL_TEXT = re.compile(r"[+-]?\d+(\.0*)?")


def _status(value: Any) -> int | None:
    """`value` as the reference's `response_status: int` validates it (pydantic, lax), or None."""
    if isinstance(value, bool | int):
        return int(value)
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    if isinstance(value, str) and _INTEGRAL_TEXT.fullmatch(value.strip()):
        return int(float(value)) if "." in value else int(value)
    return None


def _is_empty(value: Any) -> bool:
    return isinstance(value, _SUBSCRIPTABLE) and not value


def _request_headers(value: Any) -> tuple[tuple[tuple[str, str], ...], str | None]:
    """(pairs, defect): the reference lower-cases every name and value of a list of {name, value}."""
    if _is_empty(value):
        return (), None
    if not isinstance(value, list):
        return (), f"request.headers is {type(value).__name__}, not a list of {{name, value}} objects"
    pairs, problem = [], None
    for item in value:
        if (
            isinstance(item, Mapping)
            and isinstance(item.get("name"), str)
            and isinstance(item.get("value"), str)
        ):
            pairs.append((item["name"], item["value"]))
        else:
            problem = f"request.headers holds {item!r}, not a {{name, value}} object of strings"
    return tuple(pairs), problem


def _response_headers(value: Any) -> tuple[tuple[str, str], ...]:
    # Never read by the reference's evaluators: whatever is readable is kept, the rest ignored.
    if not isinstance(value, list):
        return ()
    return tuple(
        (str(item["name"]), str(item.get("value", "")))
        for item in value
        if isinstance(item, Mapping) and "name" in item
    )


def _cookies(value: Any) -> tuple[tuple[tuple[str, str], ...], str | None]:
    """Response cookies (name, value); the reference reads `name` and a text `value` of each."""
    if _is_empty(value):
        return (), None
    if not isinstance(value, list):
        return (), f"response.cookies is {type(value).__name__}, not a list"
    pairs, problem = [], None
    for item in value:
        if isinstance(item, Mapping) and "name" in item and isinstance(item.get("value", ""), str):
            pairs.append((str(item["name"]), item.get("value", "")))
        else:
            problem = f"response.cookies holds {item!r}, not a {{name, value}} object"
    return tuple(pairs), problem


def _body(part: Any, where: str) -> tuple[str | None, str | None, str | None]:
    """(text, MIME type, defect) of a `postData` or `content` object, read as the reference parses it."""
    if not part:
        return None, None, None
    if not isinstance(part, Mapping):
        return None, None, f"{where} is {type(part).__name__}, not an object"
    text, mime = part.get("text"), part.get("mimeType")
    if text and not isinstance(text, str):
        return None, None, f"{where}.text is {type(text).__name__}, not text"
    if text and "mimeType" in part and not isinstance(mime, str):
        return None, None, f"{where}.mimeType is {type(mime).__name__}, not text"
    return (text if isinstance(text, str) else None), (mime if isinstance(mime, str) else None), None


def _size(value: Any) -> int:
    """A HAR size field: a count of bytes, or -1 when it says none."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value if value >= 0 else -1
    if isinstance(value, float) and value.is_integer():
        return int(value) if value >= 0 else -1
    return -1


def _wire(value: Any) -> tuple[int, str] | None:
    """Our own `_wire` field (`evaluator/har.py`): what the wire said where the browser saw otherwise."""
    if not isinstance(value, Mapping):
        return None
    status = _status(value.get("status"))
    return None if status is None else (status, str(value.get("statusText") or ""))


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


def _unreadable(what: str) -> NetworkEvent:
    """An entry the reference wraps but cannot read anything from (a string)."""
    event = NetworkEvent(method="", url="", status=0)
    event.defects = {
        **dict.fromkeys(defect.ALL, f"the entry is {what}, not an object"),
        defect.METHOD: defect.MISSING,
    }
    return event


def event_from_har_entry(entry: Mapping[str, Any]) -> NetworkEvent:
    """One HAR entry (or Playwright resource snapshot, which has the same shape) as an event.

    Raises TraceFormatError only for an entry the reference cannot load (not
    an object or a string); other flaws become the event's `defects`.
    """
    try:
        return _event(entry)
    except _EntryError as error:
        raise TraceFormatError(str(error)) from None


def _event(entry: Any) -> NetworkEvent:
    if not isinstance(entry, Mapping):
        if isinstance(entry, str):  # `mappingproxy` takes a string (and fails on reading), not a list
            return _unreadable(type(entry).__name__)
        raise _EntryError(f"an entry must be an object, got {type(entry).__name__}")
    defects: dict[str, Any] = {}
    request, response = entry.get("request"), entry.get("response")
    if not isinstance(request, Mapping):
        defects.update(dict.fromkeys(defect.REQUEST, "the entry has no request object"))
        request = {}
    if not isinstance(response, Mapping):
        defects.update(dict.fromkeys(defect.RESPONSE, "the entry has no response object"))
        response = {}
    url = request.get("url")
    if not isinstance(url, str):
        defects.setdefault(defect.URL, f"request.url is {'missing' if url is None else type(url).__name__}")
        url = ""
    else:
        try:
            urlsplit(url)
        except ValueError as unparsable:
            defects[defect.URL] = f"request.url {url!r} cannot be parsed: {unparsable}"
        if not url:
            defects[defect.EMPTY_URL] = "request.url is empty"
    method = request.get("method", defect.MISSING)
    if not isinstance(method, str) or method != method.upper():
        defects.setdefault(defect.METHOD, method)
    if "headers" in request:
        request_headers, problem = _request_headers(request["headers"])
        if problem:
            defects[defect.HEADERS] = problem
    else:
        request_headers = ()
        defects.setdefault(defect.HEADERS, "request.headers is missing")
    status = _status(response.get("status"))
    if status is None:
        defects.setdefault(
            defect.STATUS, f"response.status {response.get('status', 'missing')!r} is no number"
        )
    post, post_mime, problem = _body(request.get("postData"), "request.postData")
    if problem:
        defects[defect.POST_DATA] = problem
    content = response.get("content")
    body, mime, problem = _body(content, "response.content")
    if problem:
        defects.setdefault(defect.CONTENT, problem)
    elif isinstance(content, Mapping) and content.get("encoding") == "base64":
        body = None
    cookies: tuple[tuple[str, str], ...] = ()
    if "cookies" in response:
        cookies, problem = _cookies(response["cookies"])
        if problem:
            defects[defect.COOKIES] = problem
    error = entry.get("_error") or response.get("_error") or response.get("_failureText")
    duration = entry.get("time")
    event = NetworkEvent(
        method=method if isinstance(method, str) else "",
        url=url,
        status=status or 0,
        request_headers=request_headers,
        post_data=post,
        post_data_mime=post_mime,
        status_text=str(response.get("statusText") or ""),
        http_version=str(request.get("httpVersion") or "HTTP/1.1"),
        redirect_url=str(response.get("redirectURL") or ""),
        response_headers=_response_headers(response.get("headers")),
        response_cookies=cookies,
        response_body=body,
        response_mime=mime,
        started=_started(entry.get("startedDateTime")),
        duration_ms=float(duration) if isinstance(duration, int | float) else 0.0,
        error=str(error) if error else None,
        request_body_size=_size(request.get("bodySize")),
        response_headers_size=_size(response.get("headersSize")),
        response_body_size=_size(response.get("bodySize")),
        content_size=_size(content.get("size")) if isinstance(content, Mapping) else -1,
        wire=_wire(response.get("_wire")),
    )
    if defects:
        event.defects = defects
    return event


BROWSER_RECORDERS = ("playwright", "webinspector", "firefox", "chrome", "chromium", "edge", "safari")
"""HAR `creator.name`s (lower-cased prefixes) of browsers' own recordings, read as they are."""


def recorded_by_browser(document: Mapping[str, Any]) -> bool:
    """Whether a HAR document is a browser's own recording (its `log.creator.name`)."""
    creator = document.get("log", {}).get("creator")
    name = creator.get("name") if isinstance(creator, Mapping) else None
    return isinstance(name, str) and name.strip().lower().startswith(BROWSER_RECORDERS)


def events_from_entries(entries: Iterable[Any], *, source: str, browser_view: bool = True) -> NetworkTrace:
    """A trace from HAR entries or Playwright resource snapshots (`{"type": "resource-snapshot", ...}`).

    With `browser_view` (entries recorded on the wire: a proxy's HAR, a journal), a 304 answering the
    browser's own revalidation is read as the browser's HAR records it (`evaluator/revalidation.py`);
    a browser's own recording already says so and is read as it is.
    """
    trace = NetworkTrace()
    revalidations = Revalidations() if browser_view else None
    defective = False
    for index, item in enumerate(entries):
        entry = item
        if isinstance(item, Mapping) and "type" in item:
            if item.get("type") != "resource-snapshot":
                continue
            entry = item.get("snapshot")
        try:
            event = _event(entry)
        except _EntryError as error:
            raise TraceFormatError(f"{source}: entry {index}: {error}") from None
        defective = defective or event.defects is not None
        if revalidations is not None and not event.defects:
            event = revalidations.browser_view(event)
        trace.append(event)
    if defective:
        defect.mark(trace)
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
    if not isinstance(entries, list | dict):
        raise TraceFormatError(f"{source}: not a HAR file (no 'log.entries' list)")
    if not entries:
        # The reference refuses such a file, so a verdict on it would not be comparable.
        raise TraceFormatError(f"{source}: the HAR file contains no entries")
    # An object in place of the list: the reference goes through its keys (each then an unreadable entry).
    return events_from_entries(list(entries), source=source, browser_view=not recorded_by_browser(document))


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
