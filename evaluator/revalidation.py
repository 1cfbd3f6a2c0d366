"""A cache revalidation as the browser saw it (docs/architecture.md, Capture: what the browser saw).

When Chromium holds a page whose freshness ran out (or is reloaded), it asks the site again with
`If-None-Match` / `If-Modified-Since`; a site that has nothing new answers `304 Not Modified` with
no body, and the browser shows its cached copy. On the wire that is a 304. In the browser's own
HAR (Playwright's `record_har`, which the official pipeline judges) a revalidated *document* or
`fetch()`/XHR response is a `200` with the cached body and the 304's headers, while a stylesheet,
script or image revalidated by the page itself stays a `304`. So a navigate task whose correct run
ends by reloading its answer page is `success` on the browser's HAR and `failure` ("expected 200,
got 304") on what the wire said.

`Revalidations` applies the browser's rule to events as they come: a GET answered `304` to a
conditional request of the browser whose `sec-fetch-dest` is a document, a frame or `empty`
(fetch/XHR) becomes what the browser recorded — status 200 and, when an earlier 200 of the same
URL was seen, its kept body, MIME type and status text — and keeps the wire's status in the
event's `wire` field. Requests without `sec-fetch-dest` (curl, scripts, clients that set the
condition themselves) saw the 304 and keep it.

One instance per stream of events that share a browser cache: a live session (its map of earlier
200s outlives an attempt, as the browser's cache does), or one HAR file read offline. The map
holds references to events already kept, never copies, and at most `limit` URLs.
"""

from __future__ import annotations

from typing import overload

from webarena_live.evaluator.trace import EventRecord, NetworkEvent

BROWSER_VIEW_DESTS = frozenset({"document", "iframe", "frame", "empty"})
"""`sec-fetch-dest` values whose revalidation the browser's HAR records as the cached 200."""

CONDITIONAL_HEADERS = frozenset({"if-none-match", "if-modified-since"})

NOT_MODIFIED = 304

_METHOD, _URL, _STATUS, _REQUEST_HEADERS = 0, 1, 2, 3
_STATUS_TEXT, _BODY, _MIME, _CONTENT_SIZE, _WIRE = 6, 11, 12, 19, 20
"""Positions in a record (`trace.RECORD_FIELDS`)."""


def answers_browser_revalidation(
    method: str, status: int, request_headers: tuple[tuple[str, str], ...]
) -> bool:
    """Whether this exchange is a 304 answering the browser's own revalidation of a page or fetch."""
    if status != NOT_MODIFIED or method != "GET":
        return False
    conditional = False
    dest = None
    for name, value in request_headers:
        lowered = name.lower()
        if lowered in CONDITIONAL_HEADERS:
            conditional = True
        elif lowered == "sec-fetch-dest":
            dest = value.strip().lower()
    return conditional and dest in BROWSER_VIEW_DESTS


def _record(item: NetworkEvent | EventRecord) -> EventRecord:
    return item.record if isinstance(item, NetworkEvent) else item


class Revalidations:
    """Turns each 304 answering the browser's revalidation into what the browser recorded (see above)."""

    __slots__ = ("_earlier", "limit", "met")

    def __init__(self, limit: int = 4096) -> None:
        self.limit = limit
        self._earlier: dict[str, NetworkEvent | EventRecord] = {}
        """The last 200 (or revalidated 200) of each GET URL, oldest first."""
        self.met = 0
        """How many 304s this instance turned into the browser's view."""

    @overload
    def browser_view(self, item: NetworkEvent) -> NetworkEvent: ...
    @overload
    def browser_view(self, item: EventRecord) -> EventRecord: ...
    @overload
    def browser_view(self, item: NetworkEvent | EventRecord) -> NetworkEvent | EventRecord: ...

    def browser_view(self, item: NetworkEvent | EventRecord) -> NetworkEvent | EventRecord:
        """`item` as the browser's HAR records it (itself, unless it answers a revalidation)."""
        if isinstance(item, NetworkEvent):
            method, url, status = item.method, item.url, item.status
        else:
            method, url, status = item[_METHOD], item[_URL], item[_STATUS]
        if method != "GET":
            return item
        if status == NOT_MODIFIED:
            record = _record(item)
            if not answers_browser_revalidation(method, status, record[_REQUEST_HEADERS]):
                return item
            seen = self._as_seen(record)
            if isinstance(item, NetworkEvent):
                event = NetworkEvent(*seen)
                event.defects = item.defects
                item = event
            else:
                item = seen
            self.met += 1
        elif status != 200:
            return item
        earlier = self._earlier
        earlier.pop(url, None)  # re-inserted last: the oldest URL is evicted first
        earlier[url] = item
        if len(earlier) > self.limit:
            del earlier[next(iter(earlier))]
        return item

    def _as_seen(self, record: EventRecord) -> EventRecord:
        fields = list(record)
        fields.extend([None] * (_WIRE + 1 - len(fields)))
        fields[_WIRE] = (NOT_MODIFIED, record[_STATUS_TEXT] or "Not Modified")
        fields[_STATUS] = 200
        fields[_STATUS_TEXT] = "OK"
        earlier = self._earlier.get(record[_URL])
        if earlier is not None:
            seen = _record(earlier)
            fields[_STATUS_TEXT] = seen[_STATUS_TEXT] or "OK"
            for position in (_BODY, _MIME, _CONTENT_SIZE):
                fields[position] = seen[position]
        return tuple(fields)
