"""Whether the task's sites answered a session: the rule a reward reads to tell a site that was down
from an agent that failed.

One rule for both places that apply it: the live finish, which sends the summary with its answer
(`sites_answered`, `unanswered`), and `webarena_live.rewards`, which applies it to the trace it reads
from a server that does not send one. Never part of a verdict (docs/architecture.md, Rewards).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

UNREACHABLE_STATUSES = frozenset({0, 502, 503, 504})
"""Statuses of an exchange the site never answered: 0 (the proxy could not reach it) and the gateway
and unavailability statuses a site behind a reverse proxy answers while it is down."""
JUDGED_TYPES = frozenset({"navigation", "mutation"})
"""The event types the evaluators judge; a failed asset or XHR says nothing about the verdict."""
FAILING_STATUSES = UNREACHABLE_STATUSES | {500}
"""Statuses that show the site failing rather than answering: the unreachable ones, and 500, the status
a broken application answers to everything. A copy's health (`replicas.health`) and a verdict's
`site_errors` (`site_errors_field`) count these."""


def answer_failed(status: object, error: object = None) -> bool:
    """Whether an answer shows the site failing: a failing status, or an error with no status (no
    connection, a timeout)."""
    return status in FAILING_STATUSES or (bool(error) and not status)


def url_origin(url: str) -> str:
    """`scheme://host:port` of a URL, the port always written."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"{parts.scheme}://{(parts.hostname or '').lower()}:{port}"


def site_origins(sites: Any) -> frozenset[str]:
    """The origins of every URL found anywhere in `sites` (a site map's URLs by site, replicas included,
    as `GET /health` lists them)."""
    found: set[str] = set()
    pending: list[Any] = [sites or {}]
    while pending:
        value = pending.pop()
        if isinstance(value, Mapping):
            pending.extend(value.values())
        elif isinstance(value, list | tuple):
            pending.extend(value)
        elif isinstance(value, str) and value.startswith(("http://", "https://")):
            found.add(url_origin(value))
    return frozenset(found)


def unanswered_events(events: Iterable[Mapping[str, Any]], origins: frozenset[str]) -> list[str]:
    """Each navigation or mutation to a site of `origins` that the site never answered, as a sentence,
    in trace order (`events`: event summaries, as the trace route shows them)."""
    found = []
    for event in events:
        if event.get("type") not in JUDGED_TYPES or event.get("status") not in UNREACHABLE_STATUSES:
            continue
        url = str(event.get("url", ""))
        if url.startswith(("http://", "https://")) and url_origin(url) in origins:
            said = event.get("error") or f"status {event.get('status')}"
            found.append(f"the site did not answer {event.get('method', 'GET')} {url}: {said}")
    return found


def sites_answered_fields(events: Iterable[Mapping[str, Any]], origins: frozenset[str]) -> dict[str, Any]:
    """What a finish's answer carries beside the verdict: `sites_answered` (every judged request to a
    site of the map got an answer) and, when not, `unanswered` (how many did not, and the first)."""
    missing = unanswered_events(events, origins)
    if not missing:
        return {"sites_answered": True}
    return {"sites_answered": False, "unanswered": {"count": len(missing), "first": missing[0]}}


SITE_ERRORS_LISTED = 5
"""How many failing answers `site_errors` lists (`first`); the count covers them all."""


def site_errors_field(
    events: Iterable[Mapping[str, Any]],
    origins: frozenset[str],
    *,
    listed: int = SITE_ERRORS_LISTED,
) -> dict[str, Any]:
    """A finish's `site_errors`: how many navigations and mutations to a site of `origins` got a failing
    answer (`answer_failed`: no connection, a timeout, 500, 502-504), how many per origin (one origin
    is one replica of one site), and the first `listed` of them (method, URL, status, error).
    Never part of the verdict: the reference's verdict stands, and this says how far to trust it."""
    count, by_origin, first = 0, dict[str, int](), list[dict[str, Any]]()
    for event in events:
        if event.get("type") not in JUDGED_TYPES:
            continue
        if not answer_failed(event.get("status"), event.get("error")):
            continue
        url, method = str(event.get("url", "")), str(event.get("method", "GET"))
        if not url.startswith(("http://", "https://")) or (origin := url_origin(url)) not in origins:
            continue
        count += 1
        by_origin[origin] = by_origin.get(origin, 0) + 1
        if len(first) < listed:
            seen = {"method": method, "url": url, "status": event.get("status") or 0}
            first.append({**seen, "error": str(event["error"])} if event.get("error") else seen)
    return {"count": count, "origins": by_origin, "first": first}


def excuse(
    events: Iterable[Mapping[str, Any]], excused: Iterable[tuple[str, str]]
) -> list[Mapping[str, Any]]:
    """`events` without the failing answers the proxy made on purpose (`serve --faults`): each (method,
    URL) of `excused` drops the first failing event of that method and URL not dropped yet. An injected
    fault is what the agent saw (it stays in the trace) but shows nothing of the site."""
    owed: dict[tuple[str, str], int] = {}
    for key in excused:
        owed[key] = owed.get(key, 0) + 1
    kept = []
    for event in events:
        key = (str(event.get("method", "GET")), str(event.get("url", "")))
        if owed.get(key) and answer_failed(event.get("status"), event.get("error")):
            owed[key] -= 1
            continue
        kept.append(event)
    return kept
