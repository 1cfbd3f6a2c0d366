"""Real message sizes of a flow, for the HAR (`headersSize`, `bodySize`, `content.size`).

Measured once at capture from what mitmproxy already holds, in a few C-level
calls: no body is kept or copied for it, so a session's memory does not grow
with body sizes (four integers per event). A body's decoded size costs
nothing when it is not content-encoded, and reads the gzip trailer when it is
gzip; other encodings are decoded to be measured only when small.
"""

from __future__ import annotations

from itertools import chain

from mitmproxy import http
from mitmproxy.net import encoding

DECODE_TO_MEASURE_CAP = 256 * 1024
"""Largest brotli/deflate/zstd body decoded just to know its size (larger ones: size unknown, -1)."""

_IDENTITY = frozenset({"", "identity", "none"})
_GZIP = frozenset({"gzip", "x-gzip"})


def request_body_size(request: http.Request) -> int:
    """Bytes of the request body as sent; -1 when it was streamed through unseen."""
    if request.stream:
        return -1
    content = request.data.content
    return len(content) if content is not None else -1


def response_sizes(response: http.Response, content_encoding: str | None) -> tuple[int, int, int]:
    """(headers size, body size as received, decoded body size) of a response; -1 for what is unknown.

    The headers size counts the status line, a `name: value` line per header
    and the blank line, as HTTP/1.1 sends them.
    """
    data = response.data
    fields = data.headers.fields
    headers = len(data.http_version) + len(data.reason) + 9 + sum(map(len, chain.from_iterable(fields)))
    headers += 4 * len(fields)
    content = data.content
    if response.stream or content is None:
        return headers, -1, -1
    return headers, len(content), decoded_size(content, content_encoding)


def decoded_size(content: bytes, content_encoding: str | None) -> int:
    """Bytes of `content` once its Content-Encoding is undone; -1 when that would cost too much."""
    coding = (content_encoding or "").strip().lower()
    if not content or coding in _IDENTITY:
        return len(content)
    if coding in _GZIP and len(content) >= 18 and content.startswith(b"\x1f\x8b"):
        return int.from_bytes(content[-4:], "little")  # ISIZE: the uncompressed size (mod 2**32)
    if len(content) > DECODE_TO_MEASURE_CAP:
        return -1
    try:
        return len(encoding.decode(content, coding))
    except ValueError:
        return len(content)  # not decodable: the body is what was received
