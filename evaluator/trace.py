"""Network events and the trace that holds them.

A `NetworkEvent` is one HTTP exchange reduced to what evaluation and HAR export
need. It is built once — from a live mitmproxy flow, a HAR entry, a Playwright
trace or a journal line. What evaluation asks of it (lower-cased headers, URL
path, navigation and static-asset flags) is derived on first use and kept, so
a trace can be evaluated many times without re-parsing, and capture does not
pay for what no evaluation reads.

A `NetworkTrace` grows by `append`. The live proxy appends *records*: an
event's constructor fields as a plain tuple (`EventRecord`). Python's garbage
collector stops tracking a tuple of plain values, so a session of thousands
of events adds nothing to the proxy's collections; an event object is made
only when an evaluation looks at that event closely, and then kept for the
memos evaluators leave on it. Classification (event type, navigation, static
asset) runs over records too, incrementally, when someone asks for it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, fields
from itertools import islice
from operator import attrgetter, itemgetter
from typing import Any

from webarena_live.evaluator.classify import EVENT_TYPES, LOWERED_NAMES, Derived, EventType, derive


@dataclass(slots=True, eq=False)
class NetworkEvent:
    """One completed (or failed: `status == 0`) HTTP exchange.

    Header tuples keep names and values as sent, in order, so a HAR export is
    faithful. Bodies are text; a body that was not kept is None.

    Treat an event as immutable once built: evaluators memoize what they
    derive from it (`memo`). It is not a frozen dataclass because the live
    proxy builds one per flow, and frozen construction costs a third more.
    """

    method: str
    url: str
    status: int
    request_headers: tuple[tuple[str, str], ...] = ()
    post_data: str | None = None
    post_data_mime: str | None = None
    status_text: str = ""
    http_version: str = "HTTP/1.1"
    redirect_url: str = ""
    response_headers: tuple[tuple[str, str], ...] = ()
    response_cookies: tuple[tuple[str, str], ...] = ()
    response_body: str | None = None
    response_mime: str | None = None
    started: float = 0.0
    """Start of the request, seconds since the epoch."""
    duration_ms: float = 0.0
    error: str | None = None
    """Why there is no response (connection refused, timeout, ...), if so."""
    request_body_size: int = -1
    """Bytes of the request body as sent; -1 when unknown (streamed, or a trace that does not say)."""
    response_headers_size: int = -1
    """Bytes of the response's status line and headers as received; -1 when unknown."""
    response_body_size: int = -1
    """Bytes of the response body as received (still content-encoded); -1 when unknown."""
    content_size: int = -1
    """Bytes of the response body once decoded (HAR `content.size`); -1 when unknown."""
    wire: tuple[int, str] | None = None
    """(status, status text) the wire carried, when the browser saw another exchange: a `304` answering
    the browser's own revalidation is the cached page to it (`evaluator/revalidation.py`); else None."""

    # Derived on first use, not constructor arguments: most events of a long session are never
    # looked at closely (an evaluator with a method filter never asks a GET for its path).
    _derived: Derived | None = field(init=False, repr=False, default=None)
    _headers: dict[str, str] | None = field(init=False, repr=False, default=None)
    _memo: dict[Any, Any] | None = field(init=False, repr=False, default=None)
    defects: dict[str, Any] | None = field(init=False, repr=False, default=None)
    """What the trace file got wrong about this exchange, if anything (`evaluator/trace_defects.py`).

    Set by the trace readers only: the reference reads each field when an
    evaluator needs it, so a defect is an error only when that field is read."""

    def __post_init__(self) -> None:
        self.method = self.method.upper()

    def _derive(self) -> Derived:
        derived = self._derived = derive(self.method, self.url, self.request_headers)
        return derived

    @property
    def record(self) -> EventRecord:
        """The constructor fields as a tuple: `NetworkEvent(*event.record)` is an equal event."""
        return (
            self.method, self.url, self.status, self.request_headers, self.post_data, self.post_data_mime,
            self.status_text, self.http_version, self.redirect_url, self.response_headers,
            self.response_cookies, self.response_body, self.response_mime, self.started, self.duration_ms,
            self.error, self.request_body_size, self.response_headers_size, self.response_body_size,
            self.content_size, self.wire,
        )  # fmt: skip

    @property
    def path(self) -> str:
        """The URL's path."""
        return (self._derived or self._derive())[0]

    @property
    def event_type(self) -> EventType:
        return EVENT_TYPES[(self._derived or self._derive())[1]]

    @property
    def is_navigation(self) -> bool:
        """The reference's navigation rule (see `classify.counts_as_navigation`)."""
        return (self._derived or self._derive())[2]

    @property
    def is_evaluation(self) -> bool:
        """False for static assets, which evaluation never looks at."""
        return (self._derived or self._derive())[3]

    @property
    def headers(self) -> dict[str, str]:
        """Request headers by lower-cased name, values as sent (the last one wins)."""
        headers = self._headers
        if headers is None:
            lowered = LOWERED_NAMES
            headers = self._headers = {lowered[name]: value for name, value in self.request_headers}
        return headers

    @property
    def memo(self) -> dict[Any, Any]:
        """Per-event cache for evaluator-internal derived values (parsed bodies, URLs)."""
        memo = self._memo
        if memo is None:
            memo = self._memo = {}
        return memo

    @property
    def referer(self) -> str | None:
        return self.headers.get("referer")

    def summary(self) -> dict[str, Any]:
        """A small JSON-ready view, for the event stream and the trace route."""
        return _summary(self.event_type, _event_summary_fields(self))


_SUMMARY_FIELDS = ("method", "url", "status", "started", "duration_ms", "redirect_url", "error", "wire")


def _summary(event_type: EventType, values: tuple[Any, ...]) -> dict[str, Any]:
    method, url, status, started, duration_ms, redirect_url, error, wire = values
    return {
        "type": event_type.value,
        "method": method,
        "url": url,
        "status": status,
        "started": started,
        "duration_ms": round(duration_ms, 3),
        **({"redirect_url": redirect_url} if redirect_url else {}),
        **({"error": error} if error else {}),
        **({"wire_status": wire[0]} if wire else {}),
    }


EventRecord = tuple[Any, ...]
"""`NetworkEvent`'s constructor fields in order (`RECORD_FIELDS`), with the method upper-cased."""

RECORD_FIELDS = tuple(f.name for f in fields(NetworkEvent) if f.init)

_record_summary_fields = itemgetter(*(RECORD_FIELDS.index(name) for name in _SUMMARY_FIELDS))
_event_summary_fields = attrgetter(*_SUMMARY_FIELDS)
_record_status = itemgetter(RECORD_FIELDS.index("status"))

_TYPE_MASK, _NAVIGATION, _EVALUATION = 0b11, 0b100, 0b1000
"""The bits of a classified event's byte in `NetworkTrace._kinds`."""


def as_event(item: NetworkEvent | EventRecord) -> NetworkEvent:
    """`item` as an event object: itself, or a new event made from the record."""
    return item if isinstance(item, NetworkEvent) else NetworkEvent(*item)


def _kind(item: NetworkEvent | EventRecord) -> int:
    if isinstance(item, NetworkEvent):
        derived = item._derived or item._derive()
    else:
        derived = derive(item[0], item[1], item[3])
    _path, type_index, navigation, evaluation = derived
    return type_index | (_NAVIGATION if navigation else 0) | (_EVALUATION if evaluation else 0)


class NetworkTrace:
    """The ordered events of one agent run, grown one event at a time (events or records).

    Reading an event through `event`, `events`, `find` or the navigation and
    evaluation views makes it an object and keeps it; iterating makes objects
    for the caller only. Counts and flags come from a byte per event, filled in
    when first needed.
    """

    __slots__ = ("_found_at", "_items", "_kinds", "_last_navigation", "_type_counts", "memo")

    def __init__(self, events: Iterable[NetworkEvent | EventRecord] = ()) -> None:
        self._items: list[NetworkEvent | EventRecord] = list(events)
        self._kinds = bytearray()
        """One byte per classified event (type and flags, see `_kind`), in order."""
        self._last_navigation = -1
        self._type_counts = [0] * len(EVENT_TYPES)
        self.memo: dict[Any, Any] = {}
        """Per-trace cache for evaluators (e.g. how far a search got); valid because traces only grow."""
        self._found_at: dict[int, int] = {}
        """Index of each event `find` returned, by object identity (the trace keeps the object)."""

    def append(self, event: NetworkEvent | EventRecord) -> None:
        self._items.append(event)

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[NetworkEvent]:
        return self.iter_from(0)

    def iter_from(self, start: int) -> Iterator[NetworkEvent]:
        """The events from index `start` on, in order; records become objects for the caller only."""
        items = self._items
        for index in range(max(0, start), len(items)):
            yield as_event(items[index])

    def summary(self, index: int) -> dict[str, Any]:
        """`event(index).summary()`, typed by the trace's own classification (done once per event, and
        shared with `counts` and evaluation) and without making a record an object."""
        self._classify()
        item = self._items[index]
        values = (
            _event_summary_fields(item) if isinstance(item, NetworkEvent) else _record_summary_fields(item)
        )
        return _summary(EVENT_TYPES[self._kinds[index] & _TYPE_MASK], values)

    def summaries_with_status(self, statuses: Collection[int]) -> Iterator[dict[str, Any]]:
        """The summaries of the events whose status is one of `statuses`, in order: each status is read
        before any summary is built, so asking for a few costs little however long the trace."""
        for index, item in enumerate(self._items):
            status = item.status if isinstance(item, NetworkEvent) else _record_status(item)
            if status in statuses:
                yield self.summary(index)

    def event(self, index: int) -> NetworkEvent:
        """The event at `index`, made an object once and kept (evaluators memoize on it)."""
        item = self._items[index]
        if isinstance(item, NetworkEvent):
            return item
        event = self._items[index] = NetworkEvent(*item)
        return event

    @property
    def events(self) -> Sequence[NetworkEvent]:
        """All events in order, every one made an object and kept (iterate for one pass instead)."""
        return [self.event(index) for index in range(len(self._items))]

    def find(self, start: int, method: str, fits: Callable[[NetworkEvent], bool]) -> list[NetworkEvent]:
        """Evaluation events from index `start` on, of `method` (any when empty), that `fits`.

        A record whose method differs is never made an object; the others are
        made one for `fits`, and kept only when found.
        """
        found: list[NetworkEvent] = []
        items = self._items
        for index in range(start, len(items)):
            item = items[index]
            if isinstance(item, NetworkEvent):
                if method and item.method != method:
                    continue
                event = item
            else:
                if method and item[0] != method:
                    continue
                event = NetworkEvent(*item)
            if event.is_evaluation and fits(event):
                items[index] = event
                self._found_at[id(event)] = index
                found.append(event)
        return found

    def index_of(self, event: NetworkEvent) -> int | None:
        """Where an event that `find` or `last_navigation` returned stands in the trace."""
        index = self._found_at.get(id(event))
        if index is None and self._last_navigation >= 0 and self._items[self._last_navigation] is event:
            index = self._last_navigation
        return index

    def _classify(self) -> None:
        kinds, items, counts = self._kinds, self._items, self._type_counts
        for index in range(len(kinds), len(items)):
            kind = _kind(items[index])
            kinds.append(kind)
            counts[kind & _TYPE_MASK] += 1
            if kind & (_NAVIGATION | _EVALUATION) == _NAVIGATION | _EVALUATION:
                self._last_navigation = index

    def last_navigation(self) -> NetworkEvent | None:
        """The last evaluation event that counts as a navigation by the reference's rule."""
        self._classify()
        return self.event(self._last_navigation) if self._last_navigation >= 0 else None

    def _having(self, flags: int) -> Iterator[NetworkEvent]:
        """The events whose classification has every bit of `flags`, in order, made objects and kept."""
        self._classify()
        return (self.event(i) for i, kind in enumerate(self._kinds) if kind & flags == flags)

    def first_evaluation_events(self, count: int) -> list[NetworkEvent]:
        """The first `count` evaluation events (static assets left out)."""
        return list(islice(self._having(_EVALUATION), count))

    @property
    def evaluation_events(self) -> Sequence[NetworkEvent]:
        """Events in order, static assets left out."""
        return list(self._having(_EVALUATION))

    @property
    def navigation_events(self) -> Sequence[NetworkEvent]:
        """Evaluation events that count as navigations by the reference's rule."""
        return list(self._having(_NAVIGATION | _EVALUATION))

    def counts(self) -> dict[str, int]:
        """Number of events by `EventType`, plus the total."""
        self._classify()
        by_type = {kind.value: n for kind, n in zip(EVENT_TYPES, self._type_counts, strict=True)}
        return {**by_type, "total": len(self._items)}
