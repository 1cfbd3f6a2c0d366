"""Credentials: the session a proxy connection names, and where a `serve` process finds its control token.

Both sides read them: the proxy (`proxy/credentials.py`, on mitmproxy's flows) and the shared ports of
`serve --workers` (`fleet/front/router.py`, on a connection's first request head); the fleet hands the token
to its workers in the environment variable the proxy's options read.
"""

from __future__ import annotations

import binascii

CONTROL_TOKEN_ENV = "WEBARENA_LIVE_CONTROL_TOKEN"
"""The environment variable a `serve` process reads its control token from (kept out of its command line)."""
WEB_TOKEN_ENV = "WEBARENA_LIVE_WEB_TOKEN"
"""mitmweb's token for `serve --web` (mitmproxy 11.1 and later ask mitmweb's visitors for one): the
front of `--workers` hands its workers one this way, so that its banner can name their addresses."""


def mitmweb_url(port: int, token: str | None) -> str:
    """Where `serve --web`'s mitmweb answers, its token included (None: mitmweb asks for none)."""
    return f"http://127.0.0.1:{port}/" + (f"?token={token}" if token else "")


def proxy_username(header_value: str | None) -> str | None:
    """The username of `Proxy-Authorization: Basic …`, or None when there is none or it is malformed.

    Not mitmproxy's `proxyauth.parse_http_basic_auth`: it refuses a password holding ':', which
    RFC 7617 allows and a `http://<session>:<any>@host:port` proxy URL can carry.
    """
    if not header_value:
        return None
    scheme, _, encoded = header_value.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = binascii.a2b_base64(encoded.strip().encode("ascii")).decode("utf-8", "replace")
    except (binascii.Error, UnicodeEncodeError):
        return None
    username = decoded.partition(":")[0]
    return username or None
