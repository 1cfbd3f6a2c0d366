"""The browser's own requests: update and connectivity checks, never a page's, never an event.

Chromium and Firefox talk to their makers' services by themselves (component and extension updates,
connectivity and captive-portal checks, safe-browsing lists, telemetry). Through the proxy those
requests would become events of whichever session the browser's proxy settings name — a phantom
`POST` after the agent's last one can flip a `last_event_only` check — while the reference records
its HAR from the page's context, which never holds them. A request is the browser's own when it
goes to one of those services' hosts and that host is no site of the site map; it is counted in its
session and listed, never captured.

And it is never sent on: an evaluation proxy has no business carrying a browser's telemetry to the
open web (nor looking the host up), so the proxy answers such a request itself (`answer`), a CONNECT
to such a host included, before mitmproxy opens any connection. `serve --forward-browser-traffic`
(`webarena_forward_browser_traffic`) forwards them as any request; they still never become events.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

from mitmproxy import http

from webarena_live.evaluator import BoundedMemo
from webarena_live.proxy.connections import BROWSER_KEY, SKIP_KEY
from webarena_live.runs.sessions import DEFAULT_SESSION, SessionStore

SERVICE_HOSTS = (
    # Chromium: component updater, extension updates, connectivity checks, safe browsing,
    # optimization hints, variations, domain reliability, downloads of components.
    "update.googleapis.com",
    "clients2.google.com",
    "clients2.googleusercontent.com",
    "clientservices.googleapis.com",
    "safebrowsing.googleapis.com",
    "safebrowsing.google.com",
    "optimizationguide-pa.googleapis.com",
    "content-autofill.googleapis.com",
    "connectivitycheck.gstatic.com",
    "beacons.gcp.gvt2.com",
    "redirector.gvt1.com",
    "edgedl.me.gvt1.com",
    "dl.google.com",
    # Chromium's own account check at start (no page asked for it); a task signing in with Google on
    # a site of its own needs `--forward-browser-traffic`.
    "accounts.google.com",
    "android.clients.google.com",
    # Chromium's warm-up of a DuckDuckGo default search engine: a CONNECT to its start host at launch
    # that no page asked for (browser-use's Chromium, whose flags leave background networking on).
    "start.duckduckgo.com",
    # browser-use's own: the logo of the screensaver it draws on its about:blank tab while the agent
    # starts (an image no page of a task asks for; the reference's HAR trimming drops images anyway).
    "cf.browser-use.com",
    # Firefox: captive-portal checks, remote settings, push, updates, telemetry, tracking lists, the
    # new tab's sponsored tiles and stories, the address bar's suggestions (Merino, through OHTTP).
    "detectportal.firefox.com",
    "services.mozilla.com",
    "cdn.mozilla.net",
    "telemetry.mozilla.org",
    "ads.mozilla.org",
    "aus5.mozilla.org",
    "spocs.getpocket.com",
    "prod.webservices.mozgcp.net",
)
"""Hosts (and their sub-domains) that only browsers' own services (and an agent framework's own
pages) use: no page of a task, no agent, asks them."""


def _service_host(host: str) -> bool:
    host = host.lower().rstrip(".")
    return any(host == name or host.endswith("." + name) for name in SERVICE_HOSTS)


is_service_host: BoundedMemo[str, bool] = BoundedMemo(_service_host, limit=1024)
"""Whether requests to `host` are the browser's own (a memo: every flow asks once per host)."""


ANSWER_STATUS = 403
ANSWER_HEADER = "X-WebArena-Live"
ANSWER_TEXT = (
    b"webarena-live: the browser's own service traffic is answered by the proxy, not forwarded "
    b"(webarena-live serve --forward-browser-traffic forwards it)\n"
)


class BrowserServices:
    """Which hosts are the browser's own services under the current site map, and whether the proxy
    answers their requests itself (the default) or forwards them."""

    def __init__(self) -> None:
        self.forward = False
        """Forward the browser's own requests (`--forward-browser-traffic`) instead of answering them."""
        self._site_hosts: frozenset[str] = frozenset()

    def use(self, site_urls: Iterable[str]) -> None:
        """The site map's URLs: a service host that is a site's is a site's (its requests are events)."""
        hosts = (urlsplit(url).hostname for url in site_urls)
        self._site_hosts = frozenset(host.rstrip(".") for host in hosts if host)

    def is_own(self, host: str) -> bool:
        """Whether a request to `host` is the browser's own (a service's host, no site's)."""
        return is_service_host[host] and host.lower().rstrip(".") not in self._site_hosts

    def answers(self, host: str) -> bool:
        """Whether the proxy answers a request to `host` itself, sending nothing on."""
        return not self.forward and self.is_own(host)


def answer(flow: http.HTTPFlow) -> None:
    """Answer `flow` (a request or a CONNECT) here: 403 and why, so no upstream connection is opened."""
    flow.response = http.Response.make(
        ANSWER_STATUS, ANSWER_TEXT, {"Content-Type": "text/plain", ANSWER_HEADER: "browser-service"}
    )


def answer_own(
    services: BrowserServices, sessions: SessionStore, flow: http.HTTPFlow, session: str | None
) -> bool:
    """Answer a request (or CONNECT) of the browser's own services here, counted and listed in
    `session`, and say whether it was one: called before mitmproxy opens a connection or looks the host
    up (it does both for a CONNECT right after `http_connect`, for a request after `request`)."""
    if not services.answers(flow.request.host):
        return False
    flow.metadata[BROWSER_KEY] = flow.metadata[SKIP_KEY] = True
    request = flow.request
    shown = f"{request.host}:{request.port}" if request.method == "CONNECT" else request.url
    sessions.get_or_create(session or DEFAULT_SESSION).attempt.note_browser_request(request.method, shown)
    answer(flow)
    return True
