"""Turn a finished mitmproxy flow into a `NetworkEvent` (DESIGN §4).

This runs once per flow on the proxy's event loop, so it does as little as it
can: each header list is decoded in one pass over mitmproxy's raw fields (its
case-insensitive lookups scan the whole list every time), Set-Cookie is parsed
only when present, and a response body is decoded only when evaluation could
ever read it (the reference parses JSON, urlencoded and multipart bodies,
nothing else) and it is small. Bodies that were streamed through
(`stream_large_bodies`) were never buffered, so there is nothing to keep.
"""

from __future__ import annotations

import re
from urllib.parse import urljoin

from mitmproxy import http
from mitmproxy.net import encoding
from mitmproxy.net.http.cookies import parse_set_cookie_header
from mitmproxy.net.http.headers import infer_content_encoding

from evaluator.trace import STATIC_ASSET_SUFFIXES, NetworkEvent

BODY_CAP = 256 * 1024
"""Largest decoded body (request or response) kept as text, in bytes."""

PART_CAP = 16 * 1024
"""In a multipart body over `BODY_CAP`, parts larger than this (file uploads) lose their content."""

KEPT_RESPONSE_HEADERS = frozenset({"content-type", "location", "set-cookie"})
"""Response headers evaluation or HAR consumers look at; the rest are dropped to keep events small."""

EVALUATED_BODY_TYPES = ("json", "x-www-form-urlencoded", "multipart/form-data")
"""Response content types whose bodies the reference can parse; other bodies are never kept."""

PROXY_AUTHORIZATION = "proxy-authorization"
_PROXY_AUTHORIZATION_BYTES = PROXY_AUTHORIZATION.encode("ascii")
_CONTENT_HEADER_LENGTHS = frozenset({len("content-type"), len("content-encoding")})

_BOUNDARY = re.compile(r"boundary=\"?([^\";]+)\"?", re.IGNORECASE)

Fields = tuple[tuple[str, str], ...]


def _text(raw: bytes) -> str:
    # The same decoding mitmproxy's Headers use, so values match what addons see.
    return raw.decode("utf-8", "surrogateescape")


SHARED_HEADERS_LIMIT = 8192
"""Distinct decoded headers remembered for sharing between events; the memory is bounded by this."""

_shared_headers: dict[tuple[bytes, bytes], tuple[str, str]] = {}


def _remember_header(field: tuple[bytes, bytes]) -> tuple[str, str]:
    pair = (field[0].decode("utf-8", "surrogateescape"), field[1].decode("utf-8", "surrogateescape"))
    if len(_shared_headers) >= SHARED_HEADERS_LIMIT:
        _shared_headers.clear()  # start over: the headers of the current traffic come back at once
    _shared_headers[field] = pair
    return pair


def shared_header(field: tuple[bytes, bytes]) -> tuple[str, str]:
    """A raw header as (name, value) text, the same objects for the same bytes (see `_shared_headers`).

    Most headers repeat on every request of a session (Host, User-Agent,
    Accept, the sec-fetch-* family), so events share one decoded pair instead
    of each holding its own strings: about a kilobyte less per event, and a
    dictionary lookup instead of two decodes.
    """
    return _shared_headers.get(field) or _remember_header(field)


def request_fields(request: http.Request) -> tuple[Fields, str | None, str | None]:
    """(headers as sent minus the proxy credentials, Content-Type, Content-Encoding) in one pass."""
    # Every flow comes through here: one comprehension over mitmproxy's raw fields,
    # then the two values evaluation needs from the few headers that can hold them.
    kept = tuple(
        [
            _shared_headers.get(field) or _remember_header(field)
            for field in request.headers.fields
            if field[0].lower() != _PROXY_AUTHORIZATION_BYTES  # it names the session, not part of the request
        ]
    )
    content_type = content_encoding = None
    for name, value in kept:
        if len(name) in _CONTENT_HEADER_LENGTHS:
            lowered = name.lower()
            if lowered == "content-type":
                content_type = value
            elif lowered == "content-encoding":
                content_encoding = value
    return kept, content_type, content_encoding


def response_fields(response: http.Response) -> tuple[Fields, str | None, str | None, str | None]:
    """(kept headers, Content-Type, Content-Encoding, Location) in one pass."""
    kept: list[tuple[str, str]] = []
    content_type = content_encoding = location = None
    for raw_name, raw_value in response.headers.fields:
        lowered = raw_name.lower()
        if lowered == b"content-encoding":
            content_encoding = _text(raw_value)
        elif lowered in (b"content-type", b"location", b"set-cookie"):
            pair = _shared_headers.get((raw_name, raw_value)) or _remember_header((raw_name, raw_value))
            kept.append(pair)
            value = pair[1]
            if lowered == b"content-type":
                content_type = value
            elif lowered == b"location":
                location = value
    return tuple(kept), content_type, content_encoding, location


def event_from_flow(flow: http.HTTPFlow, *, body_cap: int = BODY_CAP) -> NetworkEvent:
    """The event of a completed flow, or of a failed one (`status` 0, `error` set)."""
    request = flow.request
    response = flow.response
    url = request.url
    headers, request_type, request_encoding = request_fields(request)
    post_data = None
    if request.raw_content and not request.stream:
        raw = request.raw_content
        post_data = body_text(raw, request_type, request_encoding, cap=body_cap, multipart_ok=True)
    started = request.timestamp_start
    if response is None or flow.error is not None:
        ended = flow.error.timestamp if flow.error is not None else started
        return NetworkEvent(
            method=request.method,
            url=url,
            status=0,
            request_headers=headers,
            post_data=post_data,
            post_data_mime=request_type,
            http_version=request.http_version,
            started=started,
            duration_ms=max(0.0, (ended - started) * 1000.0),
            error=flow.error.msg if flow.error is not None else "no response",
        )
    kept, response_type, response_encoding, location = response_fields(response)
    body = None
    if response.raw_content and not response.stream and keeps_response_body(response_type, request.path):
        body = body_text(response.raw_content, response_type, response_encoding, cap=body_cap)
    ended = response.timestamp_end or response.timestamp_start
    return NetworkEvent(
        method=request.method,
        url=url,
        status=response.status_code,
        request_headers=headers,
        post_data=post_data,
        post_data_mime=request_type,
        status_text=response.reason,
        http_version=response.http_version,
        redirect_url=urljoin(url, location) if location else "",
        response_headers=kept,
        response_cookies=cookies_from_headers(kept),
        response_body=body,
        response_mime=response_type,
        started=started,
        duration_ms=max(0.0, (ended - started) * 1000.0),
    )


def body_text(
    raw: bytes,
    content_type: str | None,
    content_encoding: str | None,
    *,
    cap: int,
    multipart_ok: bool = False,
) -> str | None:
    """A message body as text: decompressed, decoded by its charset, None when over `cap`.

    A body whose Content-Encoding does not decode is kept as received. With
    `multipart_ok`, a multipart body over `cap` keeps its small fields and
    loses only its large parts (uploaded files): the fields a task checks
    usually sit next to an upload.
    """
    content = raw
    if content_encoding:
        try:
            decoded = encoding.decode(raw, content_encoding)
            if isinstance(decoded, bytes):
                content = decoded
        except ValueError:
            pass
    if len(content) > cap:
        if not multipart_ok or content_type is None or "multipart/form-data" not in content_type.lower():
            return None
        shrunk = shrink_multipart(content, content_type, part_cap=PART_CAP)
        if shrunk is None or len(shrunk) > cap:
            return None
        content = shrunk
    return decode_text(content, content_type or "")


def keeps_response_body(mime: str | None, request_path: str) -> bool:
    """Whether a response body is worth decoding: of a type evaluation parses, and not a static asset.

    `request_path` is the request target (query string allowed); static assets
    are never evaluation events, whatever their content type.
    """
    if mime is None:
        return False
    lowered = mime.lower()
    if not any(kind in lowered for kind in EVALUATED_BODY_TYPES):
        return False
    return not request_path.split("?", 1)[0].endswith(STATIC_ASSET_SUFFIXES)


def decode_text(content: bytes, content_type: str) -> str:
    """Bytes to text by the declared charset; undecodable bytes become U+FFFD rather than failing."""
    charset = infer_content_encoding(content_type, content)
    try:
        return content.decode(charset, "replace")
    except LookupError:  # an unknown charset name
        return content.decode("utf-8", "replace")


def shrink_multipart(content: bytes, mime: str, *, part_cap: int = PART_CAP) -> bytes | None:
    """A multipart body with the content of every part larger than `part_cap` left out.

    Part headers (field name, filename) stay, so the body still parses into
    the same field names; None when the boundary is missing.
    """
    match = _BOUNDARY.search(mime)
    if match is None:
        return None
    delimiter = b"--" + match.group(1).encode("latin-1")
    pieces = content.split(delimiter)
    kept = [pieces[0]]
    for piece in pieces[1:]:
        head, separator, body = piece.partition(b"\r\n\r\n")
        if separator and len(body) > part_cap:
            piece = head + separator + b"\r\n"
        kept.append(piece)
    return delimiter.join(kept)


def cookies_from_headers(response_headers: Fields) -> Fields:
    """(name, value) of every cookie set by the Set-Cookie headers, values as sent (not URL-decoded)."""
    cookies: list[tuple[str, str]] = []
    for name, line in response_headers:
        if name.lower() == "set-cookie":
            cookies.extend((cookie, value or "") for cookie, value, _attrs in parse_set_cookie_header(line))
    return tuple(cookies)
