"""Turn a finished mitmproxy flow into an event record (docs/architecture.md, Capture).

This runs once per flow on the proxy's event loop, before the response goes
on, so it does as little as it can: it reads mitmproxy's raw fields (its
case-insensitive header lookups scan the whole list every time), looks every
repeating value up in a memo instead of decoding it again, parses Set-Cookie
only when present, and decodes a response body only when evaluation could
ever read it (the reference parses JSON, urlencoded and multipart bodies,
nothing else) and it is small. Bodies that were streamed through
(`stream_large_bodies`) were never buffered, so there is nothing to keep.
Request bodies are decoded as the browser encoded them (`proxy/post_data.py`).
The result is a record — the fields of `NetworkEvent` as a plain tuple —
which is what a session keeps (see `evaluator.trace`).
"""

from __future__ import annotations

import re
import time
from urllib.parse import urljoin

from mitmproxy import http
from mitmproxy.net import encoding
from mitmproxy.net.http import url as mitmproxy_url
from mitmproxy.net.http.cookies import parse_set_cookie_header
from mitmproxy.net.http.headers import infer_content_encoding

from webarena_live.evaluator import STATIC_ASSET_SUFFIXES, BoundedMemo, EventRecord, NetworkEvent
from webarena_live.proxy.credentials import is_credentials
from webarena_live.proxy.options import BODY_CAP
from webarena_live.proxy.post_data import decode_post_data
from webarena_live.proxy.sizes import request_body_size, response_sizes

PART_CAP = 16 * 1024
"""In a multipart body over `BODY_CAP`, parts larger than this (file uploads) lose their content."""

EVALUATED_BODY_TYPES = ("json", "x-www-form-urlencoded", "multipart/form-data")
"""Response content types whose bodies the reference can parse; other bodies are never kept."""

_BOUNDARY = re.compile(r"boundary=\"?([^\";]+)\"?", re.IGNORECASE)

Fields = tuple[tuple[str, str], ...]


def _text(raw: bytes) -> str:
    # The same decoding mitmproxy's Headers use, so values match what addons see.
    return raw.decode("utf-8", "surrogateescape")


# Everything a flow repeats is decoded once and shared (`BoundedMemo`): the header
# pairs of a session (Host, User-Agent, Accept, the sec-fetch-* family), its origins,
# methods, versions and content types. Events then share one decoded pair instead of
# each holding its own strings — about a kilobyte less per event — and capture pays a
# dictionary lookup instead of two decodes.

_DROPPED = ("", "")
"""What `shared_header` gives for the proxy credentials: they name the session, they are no request header."""


def _decode_header(field: tuple[bytes, bytes]) -> tuple[str, str]:
    if is_credentials(field[0]):
        return _DROPPED
    return (_text(field[0]), _text(field[1]))


_shared_headers: BoundedMemo[tuple[bytes, bytes], tuple[str, str]] = BoundedMemo(_decode_header)


def shared_header(field: tuple[bytes, bytes]) -> tuple[str, str]:
    """A raw header as (name, value) text, the same objects for the same bytes (see above)."""
    return _shared_headers[field]


_CONTENT_TYPE, _LOCATION, _SET_COOKIE, _CONTENT_ENCODING = 1, 2, 3, 4
_RESPONSE_HEADER_KINDS = {
    b"content-type": _CONTENT_TYPE,
    b"location": _LOCATION,
    b"set-cookie": _SET_COOKIE,
    b"content-encoding": _CONTENT_ENCODING,
}
"""The response headers capture reads; the first three are the ones an event keeps."""


def _response_header_kind(name: bytes) -> int:
    return _RESPONSE_HEADER_KINDS.get(name.lower(), 0)


_response_header_kinds: BoundedMemo[bytes, int] = BoundedMemo(_response_header_kind)
_texts: BoundedMemo[bytes, str] = BoundedMemo(_text)
"""Methods, schemes and HTTP versions as text (decoded as mitmproxy's properties do)."""
_reasons: BoundedMemo[bytes, str] = BoundedMemo(lambda reason: reason.decode("ISO-8859-1"))
_methods: BoundedMemo[bytes, str] = BoundedMemo(lambda method: _text(method).upper())
_url_prefixes: BoundedMemo[tuple[str, str, int], str] = BoundedMemo(
    # mitmproxy's own assembly, so the text is exactly what `request.url` gives. The empty path is
    # passed: mitmproxy 12 made `path` a required argument (11 defaulted it to "").
    lambda origin: mitmproxy_url.unparse(*origin, "")
)


def request_origin(data: http.RequestData) -> str:
    """The `scheme://host[:port]` a request's `request_url` starts with (a default port left out)."""
    return _url_prefixes[(_texts[data.scheme], data.host, data.port)]


def request_url(request: http.Request) -> str:
    """`request.url`, the same text, without re-assembling the origin of every request."""
    data = request.data
    if data.method == b"CONNECT":
        return request.url
    prefix = request_origin(data)
    path = data.path
    return prefix if path == b"*" else prefix + path.decode("utf-8", "surrogateescape")


def request_headers(fields: tuple[tuple[bytes, bytes], ...]) -> Fields:
    """The request's headers as sent, as shared text pairs, without the proxy credentials."""
    kept = tuple(map(_shared_headers.__getitem__, fields))  # the memo's C-level lookup, no frame per field
    return tuple([pair for pair in kept if pair is not _DROPPED]) if _DROPPED in kept else kept


def content_headers(headers: Fields) -> tuple[str | None, str | None]:
    """(Content-Type, Content-Encoding) of decoded headers; the last one of each wins."""
    content_type = content_encoding = None
    for name, value in headers:
        if len(name) in _CONTENT_HEADER_LENGTHS:
            lowered = name.lower()
            if lowered == "content-type":
                content_type = value
            elif lowered == "content-encoding":
                content_encoding = value
    return content_type, content_encoding


_CONTENT_HEADER_LENGTHS = frozenset({len("content-type"), len("content-encoding")})


def response_fields(response: http.Response) -> tuple[Fields, str | None, str | None, str | None, bool]:
    """(kept headers, Content-Type, Content-Encoding, Location, whether a cookie is set) in one pass."""
    kept: list[tuple[str, str]] = []
    content_type = content_encoding = location = None
    sets_cookie = False
    kinds, shared = _response_header_kinds, _shared_headers
    for field in response.data.headers.fields:
        kind = kinds[field[0]]
        if not kind:
            continue
        if kind == _CONTENT_ENCODING:
            content_encoding = _text(field[1])
            continue
        pair = shared[field]
        kept.append(pair)
        if kind == _CONTENT_TYPE:
            content_type = pair[1]
        elif kind == _LOCATION:
            location = pair[1]
        else:
            sets_cookie = True
    return tuple(kept), content_type, content_encoding, location, sets_cookie


def redirect_url(url: str, location: str) -> str:
    """A response's `Location`, resolved against the request's URL; kept as sent when it is no URL
    `urljoin` can read (`http://[bad/`): a site's odd header never costs the trace its event."""
    try:
        return urljoin(url, location)
    except ValueError:
        return location


def record_from_flow(flow: http.HTTPFlow, *, body_cap: int = BODY_CAP) -> EventRecord:
    """The event of a completed flow, or of a failed one (`status` 0, `error` set), as a record.

    A record (`evaluator.trace.EventRecord`) is what the proxy keeps: the
    fields of `NetworkEvent` in order, as a plain tuple.
    """
    request = flow.request
    data = request.data
    url = request_url(request)
    headers = request_headers(data.headers.fields)
    post_data = post_mime = None
    if data.content and not request.stream:
        post_mime, post_encoding = content_headers(headers)
        post_data = body_text(data.content, post_mime, post_encoding, cap=body_cap, post_data=True)
    method = _methods[data.method]
    started = data.timestamp_start
    response = flow.response
    error = flow.error
    if response is None or error is not None:
        ended = error.timestamp if error is not None else started
        return (
            method, url, 0, headers, post_data, post_mime, "", _texts[data.http_version], "", (), (), None,
            None, started, max(0.0, (ended - started) * 1000.0),
            error.msg if error is not None else "no response", request_body_size(request), -1, -1, -1, None,
        )  # fmt: skip
    kept, response_type, response_encoding, location, sets_cookie = response_fields(response)
    answer = response.data
    body = None
    if answer.content and not response.stream and keeps_response_body(response_type, data.path):
        body = body_text(answer.content, response_type, response_encoding, cap=body_cap)
    ended = answer.timestamp_end or answer.timestamp_start
    return (
        method,
        url,
        answer.status_code,
        headers,
        post_data,
        post_mime,
        _reasons[answer.reason],
        _texts[answer.http_version],
        redirect_url(url, location) if location else "",
        kept,
        cookies_from_headers(kept) if sets_cookie else (),
        body,
        response_type,
        started,
        max(0.0, (ended - started) * 1000.0),
        None,
        request_body_size(request),
        *response_sizes(response, response_encoding),
        None,  # `wire`: the session's `Revalidations` sets it for a 304 the browser saw as its cached page
    )


def event_from_flow(flow: http.HTTPFlow, *, body_cap: int = BODY_CAP) -> NetworkEvent:
    """The event of a completed flow, or of a failed one (`status` 0, `error` set)."""
    return NetworkEvent(*record_from_flow(flow, body_cap=body_cap))


def body_text(
    raw: bytes,
    content_type: str | None,
    content_encoding: str | None,
    *,
    cap: int,
    post_data: bool = False,
) -> str | None:
    """A message body as text: decompressed, decoded by its charset, None when over `cap`.

    A body whose Content-Encoding does not decode is kept as received. A
    request body (`post_data`) is decoded by `decode_post_data`, and when it
    is multipart and over `cap` it keeps its small fields and loses only its
    large parts (uploaded files): the fields a task checks usually sit next
    to an upload.
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
        if not post_data or content_type is None or "multipart/form-data" not in content_type.lower():
            return None
        shrunk = shrink_multipart(content, content_type, part_cap=PART_CAP)
        if shrunk is None or len(shrunk) > cap:
            return None
        content = shrunk
    if post_data:
        return decode_post_data(content, content_type or "")
    return decode_text(content, content_type or "")


def keeps_response_body(mime: str | None, request_path: str | bytes) -> bool:
    """Whether a response body is worth decoding: of a type evaluation parses, and not a static asset.

    `request_path` is the request target (query string allowed); static assets
    are never evaluation events, whatever their content type.
    """
    if mime is None or not _evaluated_types[mime]:
        return False
    if isinstance(request_path, bytes):
        return not request_path.split(b"?", 1)[0].endswith(_STATIC_ASSET_SUFFIXES_BYTES)
    return not request_path.split("?", 1)[0].endswith(STATIC_ASSET_SUFFIXES)


_STATIC_ASSET_SUFFIXES_BYTES = tuple(suffix.encode("ascii") for suffix in STATIC_ASSET_SUFFIXES)

_evaluated_types: BoundedMemo[str, bool] = BoundedMemo(
    lambda mime: any(kind in mime.lower() for kind in EVALUATED_BODY_TYPES)
)
"""Whether a Content-Type value is one `EVALUATED_BODY_TYPES` covers; a site sends few distinct ones."""


def _charset_of(content_type: str) -> str | None:
    """The charset mitmproxy infers for `content_type` when the body cannot change it, else None."""
    if "html" in content_type or "text/css" in content_type:
        return None  # mitmproxy reads a <meta> or @charset from the body
    return infer_content_encoding(content_type)


_charsets: BoundedMemo[str, str | None] = BoundedMemo(_charset_of)


def decode_text(content: bytes, content_type: str) -> str:
    """Bytes to text by the declared charset; undecodable bytes become U+FFFD rather than failing."""
    charset = _charsets[content_type] or infer_content_encoding(content_type, content)
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


def tunnel_failure_event(flow: http.HTTPFlow) -> NetworkEvent:
    """The event of a CONNECT whose upstream could not be reached (status 0, the reason in `error`).

    Only the authority is known (the client never sent the request it meant to
    tunnel), so the URL is `https://host[:port]/` and the method stays CONNECT.
    """
    request = flow.request
    if flow.error is not None:
        reason = flow.error.msg
    elif flow.response is not None:
        reason = (flow.response.get_text(strict=False) or flow.response.reason).split(" If you plan", 1)[0]
    else:
        reason = "the tunnel could not be opened"
    started = request.timestamp_start
    return NetworkEvent(
        method="CONNECT",
        url=f"https://{request.host}/" if request.port == 443 else f"https://{request.host}:{request.port}/",
        status=0,
        request_headers=tuple(request.headers.items(multi=True)),
        http_version=request.http_version,
        started=started,
        duration_ms=max(0.0, (time.time() - started) * 1000.0),
        error=reason.strip(),
    )
