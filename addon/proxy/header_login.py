"""Header login: the site's auto-login header on every request to a site configured with `use_header_login`.

The official harness logs its browser into the shop's admin with a request
header rather than the login form (`X-M2-Admin-Auto-Login: <user>:<password>`,
sent with every request of the browser context). A site map entry with
`"use_header_login": true` and `credentials` makes the proxy do the same for
requests to that site's origins, so any agent, in any language, is logged in
as the harness's agents are. The header is added in `requestheaders`, before
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

    def use(self, site_map: SiteMap) -> None:
        """Take the headers of `site_map` (called whenever the addon's site map changes)."""
        by_origin: dict[str, list[tuple[str, str]]] = {}
        for origin, header, value in site_map.login_headers:
            by_origin.setdefault(origin, []).append((header, value))
        self.by_origin = by_origin

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        if not self.by_origin:
            return
        headers = self.by_origin.get(origin_of(flow.request.pretty_url))
        for name, value in headers or ():
            if name not in flow.request.headers:
                flow.request.headers[name] = value
