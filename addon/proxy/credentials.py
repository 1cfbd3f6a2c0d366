"""Proxy credentials: the session name an agent's traffic carries, and the 407 that asks for it.

The username of `Proxy-Authorization: Basic …` names the session. The header
names the session to this proxy only, so it is taken off the request before
anything goes upstream. Every request of a client that sends credentials up
front repeats them, so this runs per request and reads each distinct value
once (`BoundedMemo`).
"""

from __future__ import annotations

from mitmproxy import http

from webarena_live.addresses.credentials import proxy_username
from webarena_live.evaluator import BoundedMemo
from webarena_live.runs.sessions import session_name_problem

PROXY_AUTHORIZATION = "proxy-authorization"
REALM = "webarena-live"
CHALLENGE_DETAIL = "proxy credentials name the session: http://<session>:<any>@host:port"

_NAME = PROXY_AUTHORIZATION.encode("ascii")
_LENGTH = len(_NAME)


def _read(value: bytes) -> tuple[str | None, str | None]:
    """(session name, why it cannot be one) from a raw Proxy-Authorization value."""
    username = proxy_username(value.decode("utf-8", "surrogateescape"))
    if username is None:
        return None, None
    problem = session_name_problem(username)
    return (None, problem) if problem else (username, None)


_read_once: BoundedMemo[bytes, tuple[str | None, str | None]] = BoundedMemo(_read, limit=1024)


def is_credentials(name: bytes) -> bool:
    """Whether a raw header name is Proxy-Authorization (any case)."""
    return len(name) == _LENGTH and name.lower() == _NAME


def take_credentials(request: http.Request) -> tuple[str | None, str | None]:
    """(session name, why the credentials cannot name one), taking every Proxy-Authorization off `request`.

    (None, None) when the request carries no usable credentials.
    """
    # One plain pass over mitmproxy's raw fields, then a slice: its Headers API would scan the
    # list twice (lookup, then delete), each time comparing every name case-insensitively.
    # The length test is inline (no call per header): it rules out nearly every other name.
    headers = request.headers
    fields = headers.fields
    for field in fields:
        name = field[0]
        if len(name) == _LENGTH and name.lower() == _NAME:
            break
    else:
        return None, None
    index = fields.index(field)
    rest = fields[index + 1 :]
    if any(is_credentials(name) for name, _ in rest):  # sent twice: none may go upstream
        headers.fields = tuple([f for f in fields if not is_credentials(f[0])])
    else:
        headers.fields = fields[:index] + rest
    return _read_once[field[1]]


def challenge(detail: str = CHALLENGE_DETAIL) -> http.Response:
    """The 407 that makes browsers send their proxy credentials."""
    return http.Response.make(
        407,
        f"407 Proxy Authentication Required: {detail}\n",
        {"Proxy-Authenticate": f'Basic realm="{REALM}"', "Content-Type": "text/plain; charset=utf-8"},
    )
