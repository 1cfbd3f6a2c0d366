"""How an event is labelled: its type for people (navigation, mutation, other), the reference's own
navigation rule, and whether it is a static asset, from its method, URL and request headers.

`derive` computes all of it at once as a tuple of plain values, which a trace
keeps per event (`trace.NetworkTrace`) and an event object keeps for itself.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from urllib.parse import urlsplit

from webarena_live.evaluator.memo import BoundedMemo

# URL path endings the reference treats as static assets (never evaluation events).
STATIC_ASSET_SUFFIXES = (
    ".css", ".js", ".png", ".jpg", ".jpeg", ".gif", ".svg",
    ".woff", ".woff2", ".ttf", ".ico", ".webp",
)  # fmt: skip

MUTATION_METHODS = ("POST", "PUT", "PATCH", "DELETE")
"""The methods that may change a site: the trace's mutation events, the pool's candidate changes, the
site map's rule methods and the control API's page guard all read this one constant."""


class EventType(StrEnum):
    """How the design (docs/architecture.md, Capture) labels an event for people and the event stream."""

    NAVIGATION = "navigation"
    MUTATION = "mutation"
    OTHER = "other"


def classify(method: str, headers: dict[str, str]) -> EventType:
    """Label an event from its method and lower-cased request headers (docs/architecture.md, Capture).

    A navigation is exactly what the reference counts as one (`counts_as_navigation`), so the label
    people see never disagrees with the verdict: a Node `fetch` of a page that accepts `text/html`
    (`sec-fetch-mode: cors`, no `sec-fetch-user`) is a navigation to the reference, and is labelled so.
    """
    method = method.upper()
    if method in MUTATION_METHODS:
        return EventType.MUTATION
    return EventType.NAVIGATION if counts_as_navigation(method, headers) else EventType.OTHER


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


LOWERED_NAMES: BoundedMemo[str, str] = BoundedMemo(str.lower, limit=4096)
"""Lower-cased header names, shared by every event (names repeat on every request)."""


def _is_static_asset(path: str) -> bool:
    return path.endswith(STATIC_ASSET_SUFFIXES)


EVENT_TYPES = tuple(EventType)

NAVIGATION_HEADERS = frozenset({"sec-fetch-dest", "sec-fetch-mode", "sec-fetch-user", "accept"})
"""The request headers `classify` and `counts_as_navigation` read."""


Derived = tuple[str, int, bool, bool]
"""(URL path, index of the event type in `EVENT_TYPES`, reference navigation, not a static asset).

The type is an index, not the enum member: a tuple of plain values is one the
garbage collector stops tracking, and a long session holds one per event."""


def _navigation_fields(request_headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    """The request headers the rules read, by lower-cased name; the last value wins, as in
    `NetworkEvent.headers` (the reference reads its HAR's headers the same way)."""
    lowered = LOWERED_NAMES
    wanted: dict[str, str] = {}
    for name, value in request_headers:
        key = lowered[name]
        if key in NAVIGATION_HEADERS:
            wanted[key] = value
    return wanted


def is_reference_navigation(method: str, request_headers: Iterable[tuple[str, str]]) -> bool:
    """`counts_as_navigation` of an event, from its upper-cased method and its request header pairs."""
    # only a GET can be one: another method's headers need no pass
    return method == "GET" and counts_as_navigation(method, _navigation_fields(request_headers))


def derive(method: str, url: str, request_headers: Iterable[tuple[str, str]]) -> Derived:
    """What evaluation asks of an event, from its upper-cased method, URL and request headers."""
    wanted = _navigation_fields(request_headers)
    path = urlsplit(url).path
    return (
        path,
        EVENT_TYPES.index(classify(method, wanted)),
        counts_as_navigation(method, wanted),
        not _is_static_asset(path),
    )
