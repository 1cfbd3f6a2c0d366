"""Keep web pages away from the control API.

Agents browse sites that may be hostile. A page's script can send requests to
the reserved control host through the proxy, or straight to the control port
on 127.0.0.1, and try to start, reset or finish the agent's session with a
forged answer. Browsers mark every request a page makes: a POST (fetch or
form) and every cross-origin fetch carry `Origin`, subresource loads (an
`<img>`) carry `Referer`, and on secure and loopback destinations the
`Sec-Fetch-*` headers also say who started the request.
Agent harnesses (requests, curl, Playwright's API client, Node's fetch) send
none of these, so a control request carrying them came from a page and is
refused — except reads by the control API's own pages (the dashboard). `GET`
routes change nothing, and what a page's `<img>` or `no-cors` request gets
back it cannot read.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Mapping

from webarena_live.addresses.credentials import CONTROL_TOKEN_ENV
from webarena_live.control.errors import ControlError, MethodNotAllowed, PageRefused, Unauthorized
from webarena_live.evaluator import MUTATION_METHODS

PUBLIC_PATHS = frozenset({"/health", "/openapi.json", "/"})
"""Routes anyone may read: no token, no page check (they reveal nothing about sessions). `/` is the
dashboard page, which asks for the token itself when the API needs one."""

DASHBOARD_FILES = "/dashboard/"
"""The dashboard's scripts and styles: public like its page."""


PAC_SUFFIX = "/proxy.pac"
"""A session's proxy auto-config file is public too: the browser fetches it itself, with no way to
send a token, and it reveals a port number only."""


def is_public(path: str) -> bool:
    return (
        path in PUBLIC_PATHS
        or path.startswith(DASHBOARD_FILES)
        or (path.startswith("/sessions/") and path.endswith(PAC_SUFFIX))
    )


NO_CORS = "the control API grants no CORS access"


def refusal(
    method: str, path: str, headers: Mapping[str, str], token: Callable[[], str | None]
) -> ControlError | None:
    """The guard's refusal of a request (`headers` keyed by lower-cased name), or None when it may go
    on: a web page's request is refused (`PageRefused`), a CORS preflight too (no web origin is ever
    granted access), then the control token (`token()`, asked last) is checked; the public paths
    need neither."""
    if is_public(path):
        return MethodNotAllowed("method_not_allowed", NO_CORS) if method == "OPTIONS" else None
    if problem := page_request_problem(method, headers):
        return PageRefused("page_request_refused", problem)
    if method == "OPTIONS":
        return MethodNotAllowed("method_not_allowed", NO_CORS)
    if problem := token_problem(token(), headers.get("authorization")):
        return Unauthorized("unauthorized", problem)
    return None


PAGE_INITIATED_SITES = frozenset({"cross-site", "same-site", "same-origin"})
"""`Sec-Fetch-Site` values of a request some page started (`none` is the user at the address bar)."""


def page_request_problem(method: str, headers: Mapping[str, str]) -> str | None:
    """Why a control request looks started by a web page, or None when it does not.

    `headers` is keyed by lower-cased name. A page of the control API's own origin (the dashboard
    at `/`) may read: a browser marks its requests `Sec-Fetch-Site: same-origin`, which no other
    page can make it send, and reads change nothing.
    """
    site = headers.get("sec-fetch-site", "").strip().lower()
    if site == "same-origin" and method.upper() in ("GET", "HEAD"):
        return None
    origin = headers.get("origin")
    if origin is not None:
        return f"control requests from web pages are refused (Origin: {origin[:200]})"
    referer = headers.get("referer")
    if referer is not None:  # an <img>, <script> or link a page loaded: no Origin, but a Referer
        return f"control requests from web pages are refused (Referer: {referer[:200]})"
    if site in PAGE_INITIATED_SITES:
        return f"control requests from web pages are refused (Sec-Fetch-Site: {site})"
    mode = headers.get("sec-fetch-mode", "").strip().lower()
    browser_marked = bool(site) or "sec-fetch-dest" in headers
    # Node's fetch sends Sec-Fetch-Mode alone; only a browser adds Site/Dest next to it.
    if method.upper() in MUTATION_METHODS and browser_marked and mode and mode != "navigate":
        return f"control requests from web pages are refused (Sec-Fetch-Mode: {mode})"
    return None


TOKEN_HINT = (
    "send Authorization: Bearer <control token>, the token serve was given (--control-token, or "
    f"${CONTROL_TOKEN_ENV}, which the shipped clients also read)"
)
"""What a 401 asks for, naming where the token comes from: the variable a harness most likely lacks."""


def token_problem(expected: str | None, authorization: str | None) -> str | None:
    """Why the request fails the control token check, or None (also when no token is configured)."""
    if not expected:
        return None
    if authorization is None:
        return f"this control API needs its token: {TOKEN_HINT}"
    scheme, _, value = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not _same(value.strip(), expected):
        return f"wrong control token; {TOKEN_HINT}"
    return None


def _same(given: str, expected: str) -> bool:
    # Constant time, so the token cannot be guessed byte by byte from response times.
    return hmac.compare_digest(given.encode("utf-8", "surrogateescape"), expected.encode("utf-8"))
