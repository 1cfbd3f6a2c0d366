"""Why a session captured nothing: what the proxy did see of it, in one place for every answer.

A finish (and a preview) of a session without an event answers `409 no_events`; the dashboard shows the
same words in the session's view (`GET /sessions/{s}`, `nothing_captured`). The proxy sees three things of
such a session: nothing at all (its traffic does not use the proxy); only the browser's own service
traffic (`proxy/browser_traffic.py`: the browser uses the proxy, but went around it for the sites, as
Chromium does for loopback hosts unless `<-loopback>` is in its bypass list); requests to hosts that are
no site of the site map, which never became events (a tunnel to them that could not be opened). Each
answer also says what to do: such a session keeps its address until it is abandoned and finished.

What an attempt notes here costs a dictionary update on paths that are rare already (a failed tunnel
outside the site map); the words are made only when asked for.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import TYPE_CHECKING
from urllib.parse import quote, urlsplit

from webarena_live.evaluator import SiteMap

if TYPE_CHECKING:
    from webarena_live.runs.attempt import Attempt

UNMAPPED_LISTED = 10
"""Distinct hosts outside the site map an attempt names (the first ones); all requests are counted."""
HOSTS_NAMED = 5
"""Hosts one sentence names before it says how many more."""


class Unmapped:
    """Requests of an attempt to hosts that are no site of the site map and never became events."""

    def __init__(self) -> None:
        self.count = 0
        self.hosts: dict[str, int] = {}
        """Requests by host (`HOST:PORT`), the first `UNMAPPED_LISTED` hosts."""

    def note(self, host: str) -> None:
        self.count += 1
        if host in self.hosts or len(self.hosts) < UNMAPPED_LISTED:
            self.hosts[host] = self.hosts.get(host, 0) + 1


def is_loopback(host: str) -> bool:
    """Whether Chromium sends requests to `host` around its proxy by itself (its implicit bypass rules:
    localhost, *.localhost, 127.0.0.0/8, [::1])."""
    name = host.strip("[]").lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _named(hosts: Iterable[str]) -> str:
    listed = list(dict.fromkeys(hosts))
    shown = ", ".join(listed[:HOSTS_NAMED])
    more = len(listed) - HOSTS_NAMED
    return f"{shown} and {more} more" if more > 0 else shown


def _requests(count: int) -> str:
    return f"{count} request{'s' if count != 1 else ''}"


def _service_host(line: str) -> str:
    """The host of a listed browser request (`METHOD URL`, a CONNECT's `METHOD HOST:PORT`)."""
    target = line.partition(" ")[2]
    return (urlsplit(target).hostname or target) if "://" in target else target.rsplit(":", 1)[0]


def nothing_captured(
    session: str,
    *,
    site_urls: Iterable[str],
    browser_requests: int,
    recent_browser_requests: Iterable[str],
    unmapped: Unmapped,
) -> str:
    """What a `409 no_events` says of `session`: what the proxy saw of it, and what to do now.
    `site_urls`: the task's sites as the session reaches them (its leased replicas, or the site map's)."""
    sites = [split.netloc for split in map(urlsplit, site_urls) if split.netloc]
    site_text = _named(sites) or "none mapped"
    said = f"no events captured in session {session!r}"
    if not browser_requests and not unmapped.count:
        said += (
            ": the proxy saw no request of it at all; is the agent's traffic using the proxy (the "
            f"session's own address, or proxy credentials naming the session)? The task's sites: {site_text}."
        )
    if browser_requests:
        services = _named(_service_host(line) for line in recent_browser_requests)
        said += (
            f": the proxy saw only {_requests(browser_requests)} of the browser's own services ({services}), "
            f"none to the task's sites ({site_text}): the browser uses the proxy but sent the sites' "
            "requests around it."
        )
    if not unmapped.count and any(is_loopback(urlsplit(f"//{site}").hostname or site) for site in sites):
        said += (
            " Chromium sends loopback hosts (127.0.0.1, localhost) direct, never through its proxy, "
            "unless `<-loopback>` is in its proxy bypass list: launch it with "
            '`--proxy-bypass-list=<-loopback>` (browser-use: `bypass="<-loopback>"`; Playwright\'s own '
            "`proxy` option adds it, its `args` do not)."
        )
    if unmapped.count:
        hosts = _named(unmapped.hosts)
        lead = " It also sent" if browser_requests else ": the proxy saw"
        said += (
            f"{lead} {_requests(unmapped.count)} to hosts that are no site of the site map ({hosts}), "
            f"none to the task's sites ({site_text}); are its URLs the start URLs POST /sessions answered?"
        )
    return said + what_to_do(session)


def said_of(attempt: Attempt, site_map: SiteMap) -> str:
    """`nothing_captured` for `attempt`: the task's sites as it reaches them (its lease's replicas, else
    the site map's URLs) and what it saw."""
    replicas = attempt.lease.replicas.values() if attempt.lease is not None else ()
    sites = attempt.task.sites if attempt.task is not None else ()
    urls = replicas or [replica.url for site in sites for replica in site_map.replicas(site)]
    return nothing_captured(
        attempt.session, site_urls=urls, browser_requests=attempt.browser_requests,
        recent_browser_requests=attempt.recent_browser_requests, unmapped=attempt.unmapped,
    )  # fmt: skip


def what_to_do(session: str) -> str:
    """The end of every `no_events` answer: such a session keeps running, and its address."""
    path = f"/sessions/{quote(session, safe='')}"
    return (
        " The session keeps running and keeps its address: send its traffic and finish again, or start "
        "the same session name again (it keeps the address); to give it up, abandon it "
        f"(POST {path}/abandon) and then finish it (POST {path}/finish): that finish judges it with "
        "`lease_ended: abandoned` and frees its address for the next start."
    )
