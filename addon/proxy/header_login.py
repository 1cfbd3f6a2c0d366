"""Header login: the site's auto-login header on every request to a site configured with `use_header_login`.

The official images log a browser in with a request header rather than the login form: the shop's
admin (`X-M2-Admin-Auto-Login: <user>:<password>`, what the official harness sends with every request
of its browser context), the storefront's customer (`X-M2-Customer-Auto-Login: <email>:<password>`)
and the forum (`X-Postmill-Auto-Login: <username>:<password>`); evaluator `AUTO_LOGIN_HEADERS`. A site
map entry with `"use_header_login": true` and `credentials` makes the proxy do the same for requests to
that site, so any agent, in any language, is logged in as the harness's agents are. A request gets the
headers of the site its URL is on (the longest matching base URL: the storefront at `http://h` and the
admin at `http://h/admin` each get their own); one on no site's path but on a site's origin (the admin's
`/static/...`) gets that origin's. The header is added in `requestheaders`, before
anything else sees the request, so the trace records it as the browser would
have sent it. A header the client sent itself is left alone.
"""

from __future__ import annotations

from mitmproxy import http

from webarena_live.evaluator import SiteMap


def origin_of(url: str) -> str:
    """`scheme://host[:port]` of an absolute URL, lower-cased (what a site's URLs are matched by)."""
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{rest.split('/', 1)[0]}".lower()


class HeaderLogin:
    """Adds the configured auto-login headers; a no-op until a site map asks for one.

    `WebArenaLive.requestheaders` calls it only while some site asks for header login, so plain
    proxying pays nothing for it; it also works as an addon of its own (the tests load it so)."""

    def __init__(self) -> None:
        self.by_origin: dict[str, list[tuple[str, str]]] = {}
        """The origins of sites that log in by header (a request to any other costs one lookup)."""
        self.by_site: dict[str, tuple[str, str]] = {}
        self.site_map: SiteMap | None = None

    def use(self, site_map: SiteMap) -> None:
        """Take the headers of `site_map` (called whenever the addon's site map changes)."""
        by_origin: dict[str, list[tuple[str, str]]] = {}
        for origin, header, value in site_map.login_headers:
            by_origin.setdefault(origin, []).append((header, value))
        self.by_origin = by_origin
        self.by_site = site_map.login_headers_by_site
        self.site_map = site_map

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        if not self.by_origin or self.site_map is None:
            return
        url = flow.request.pretty_url
        on_origin = self.by_origin.get(origin_of(url))
        if not on_origin:
            return
        sites = self.site_map.replicas_of(url)
        # Off every site's path (the admin's `/static/...` beside its `/admin`): the origin's headers, as
        # a browser context sends its headers with every request.
        headers = [self.by_site[site] for site, _ in sites if site in self.by_site] if sites else on_origin
        for name, value in headers:
            if name not in flow.request.headers:
                flow.request.headers[name] = value
