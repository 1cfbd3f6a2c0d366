"""Network events and the trace that holds them.

A `NetworkEvent` is one HTTP exchange reduced to what evaluation and HAR export
need. It is built once — from a live mitmproxy flow, a HAR entry, a Playwright
trace or a journal line — and everything evaluation asks of it on every verdict
(lower-cased headers, URL path, navigation and static-asset flags) is computed
at construction, so a trace can be evaluated many times without re-parsing.

A `NetworkTrace` grows by `append`; it keeps the evaluation events (static
assets dropped) and the navigation events in their own lists as they arrive,
so no evaluation has to filter the whole trace again.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

# URL path endings the reference treats as static assets (never evaluation events).
STATIC_ASSET_SUFFIXES = (
    ".css", ".js", ".png", ".jpg", ".jpeg", ".gif", ".svg",
    ".woff", ".woff2", ".ttf", ".ico", ".webp",
)  # fmt: skip

MUTATION_METHODS = frozenset({"POST", "PUT", "DELETE", "PATCH"})


class EventType(StrEnum):
    """How the design (DESIGN §4) labels an event for people and the event stream."""

    NAVIGATION = "navigation"
    MUTATION = "mutation"
    OTHER = "other"


def classify(method: str, headers: dict[str, str]) -> EventType:
    """Label an event from its method and lower-cased request headers (DESIGN §4).

    Clients that send no `sec-fetch-*` headers (curl, requests) fall back to the
    Accept header: a GET that accepts `text/html` first is a navigation.
    """
    method = method.upper()
    if method in MUTATION_METHODS:
        return EventType.MUTATION
    if method != "GET":
        return EventType.OTHER
    dest = headers.get("sec-fetch-dest")
    mode = headers.get("sec-fetch-mode")
    if dest is not None or mode is not None:
        if (dest or "").lower() == "document" and (mode or "").lower() == "navigate":
            return EventType.NAVIGATION
        return EventType.OTHER
    if headers.get("accept", "").lower().startswith("text/html"):
        return EventType.NAVIGATION
    return EventType.OTHER


def counts_as_navigation(method: str, headers: dict[str, str]) -> bool:
    """The reference evaluator's own navigation rule, which decides verdicts.

    It is stricter than `classify`: when the browser sends `sec-fetch-user`
    (a user-activated navigation), all four of dest=document, mode=navigate,
    user=?1 and an Accept with text/html are required; without it, an Accept
    starting with text/html is enough. Verdict parity needs this exact rule.
    """
    if method != "GET":
        return False
    accept = headers.get("accept", "").lower()
    if "sec-fetch-user" in headers:
        return (
            headers.get("sec-fetch-dest", "").lower() == "document"
            and headers.get("sec-fetch-mode", "").lower() == "navigate"
            and headers["sec-fetch-user"].lower() == "?1"
            and "text/html" in accept
        )
    return accept.startswith("text/html")


_LOWERED_NAMES: dict[str, str] = {}
"""Lower-cased header names, shared by every event (names repeat on every request)."""


def _lowered(name: str) -> str:
    found = name.lower()
    if len(_LOWERED_NAMES) < 4096:  # bounded: names are few, but a client may invent many
        _LOWERED_NAMES[name] = found
    return found


def _is_static_asset(path: str) -> bool:
    return path.endswith(STATIC_ASSET_SUFFIXES)


@dataclass(frozen=True, slots=True, eq=False)
class NetworkEvent:
    """One completed (or failed: `status == 0`) HTTP exchange.

    Header tuples keep names and values as sent, in order, so a HAR export is
    faithful. Bodies are text; a body that was not kept is None.
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

    # Derived once at construction (see __post_init__); not constructor arguments.
    headers: dict[str, str] = field(init=False, repr=False)
    """Request headers by lower-cased name, values as sent (the last one wins)."""
    path: str = field(init=False, repr=False)
    event_type: EventType = field(init=False)
    is_navigation: bool = field(init=False, repr=False)
    """The reference's navigation rule (see `counts_as_navigation`)."""
    is_evaluation: bool = field(init=False, repr=False)
    """False for static assets, which evaluation never looks at."""
    memo: dict[Any, Any] = field(init=False, repr=False)
    """Per-event cache for evaluator-internal derived values (parsed bodies, URLs)."""

    def __post_init__(self) -> None:
        method = self.method.upper()
        lowered = _LOWERED_NAMES
        headers = {(lowered.get(name) or _lowered(name)): value for name, value in self.request_headers}
        path = urlsplit(self.url).path
        setter = object.__setattr__
        setter(self, "method", method)
        setter(self, "headers", headers)
        setter(self, "path", path)
        setter(self, "event_type", classify(method, headers))
        setter(self, "is_navigation", counts_as_navigation(method, headers))
        setter(self, "is_evaluation", not _is_static_asset(path))
        setter(self, "memo", {})

    @property
    def referer(self) -> str | None:
        return self.headers.get("referer")

    def response_header(self, name: str) -> str | None:
        """The last response header called `name` (case-insensitive), if kept."""
        name = name.lower()
        found = None
        for key, value in self.response_headers:
            if key.lower() == name:
                found = value
        return found

    def summary(self) -> dict[str, Any]:
        """A small JSON-ready view, for the event stream and the trace route."""
        return {
            "type": self.event_type.value,
            "method": self.method,
            "url": self.url,
            "status": self.status,
            "started": self.started,
            "duration_ms": round(self.duration_ms, 3),
            **({"redirect_url": self.redirect_url} if self.redirect_url else {}),
            **({"error": self.error} if self.error else {}),
        }


class NetworkTrace:
    """The ordered events of one agent run, grown one event at a time."""

    __slots__ = ("_evaluation", "_events", "_navigation", "_type_counts", "memo")

    def __init__(self, events: Iterable[NetworkEvent] = ()) -> None:
        self._events: list[NetworkEvent] = []
        self._evaluation: list[NetworkEvent] = []
        self._navigation: list[NetworkEvent] = []
        self._type_counts = dict.fromkeys(EventType, 0)
        self.memo: dict[Any, Any] = {}
        """Per-trace cache for evaluators (e.g. how far a search got); valid because traces only grow."""
        for event in events:
            self.append(event)

    def append(self, event: NetworkEvent) -> None:
        self._events.append(event)
        self._type_counts[event.event_type] += 1
        if event.is_evaluation:
            self._evaluation.append(event)
            if event.is_navigation:
                self._navigation.append(event)

    def __len__(self) -> int:
        return len(self._events)

    def __iter__(self) -> Iterator[NetworkEvent]:
        return iter(self._events)

    @property
    def events(self) -> Sequence[NetworkEvent]:
        """All events in order. Read-only by convention: use `append` to add."""
        return self._events

    @property
    def evaluation_events(self) -> Sequence[NetworkEvent]:
        """Events in order, static assets left out."""
        return self._evaluation

    @property
    def navigation_events(self) -> Sequence[NetworkEvent]:
        """Evaluation events that count as navigations by the reference's rule."""
        return self._navigation

    def counts(self) -> dict[str, int]:
        """Number of events by `EventType`, plus the total."""
        return {**{kind.value: n for kind, n in self._type_counts.items()}, "total": len(self._events)}
