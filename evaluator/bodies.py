"""Request and response bodies, parsed the way the reference evaluator reads them.

Only three kinds of body become data: URL-encoded forms, JSON objects and
multipart forms; anything else (and JSON that is not an object) is `None`.
The MIME type decides, matched case-sensitively as a substring, as the
reference does. A form field given several times keeps its *first* value.
The reference never decodes base64 HAR content; such content does not parse
(`har.py` therefore keeps no body for it).

Parsed bodies are memoized on the event, so each is parsed at most once
however many evaluations look at it.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import parse_qs

from webarena_live.evaluator.trace import NetworkEvent

FORM = "application/x-www-form-urlencoded"
JSON = "application/json"
MULTIPART = "multipart/form-data"

_BOUNDARY = re.compile(r"boundary=([^;\s]+)")
_FIELD_NAME = re.compile(r'name="([^"]+)"')
_POST_DATA = "bodies.post_data"
_RESPONSE_CONTENT = "bodies.response_content"


def parse_form(text: str) -> dict[str, str]:
    """`a=1&a=2&b=` -> `{"a": "1", "b": ""}` (first value of a repeated field)."""
    return {
        name: values[0] if values else "" for name, values in parse_qs(text, keep_blank_values=True).items()
    }


def parse_multipart(text: str, boundary: str) -> dict[str, str]:
    """Form fields of a multipart body, by name (a later part of the same name wins).

    Parts are separated by `--boundary`; a part's headers end at the first
    blank line (CRLF or LF). The field name comes from a Content-Disposition
    header found among the CRLF-separated header lines; the value loses its
    trailing line breaks.
    """
    fields: dict[str, str] = {}
    for chunk in text.split(f"--{boundary}"):
        part = chunk.strip()
        if not part or part == "--":
            continue
        if "\r\n\r\n" in part:
            head, body = part.split("\r\n\r\n", 1)
        elif "\n\n" in part:
            head, body = part.split("\n\n", 1)
        else:
            continue
        for line in head.split("\r\n"):
            if line.lower().startswith("content-disposition:"):
                name = _FIELD_NAME.search(line)
                if name:
                    fields[name.group(1)] = body.rstrip("\r\n")
                break
    return fields


def parse_body(text: str | None, mime: str | None) -> dict[str, Any] | None:
    """A body as a dict, or None when it is empty, of another type, or not an object."""
    if not text:
        return None
    mime = mime or ""
    if FORM in mime:
        return parse_form(text)
    if JSON in mime:
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if isinstance(data, dict):
            return data
    if MULTIPART in mime:
        boundary = _BOUNDARY.search(mime)
        if boundary:
            return parse_multipart(text, boundary.group(1))
    return None


def post_data(event: NetworkEvent) -> dict[str, Any] | None:
    """The event's request body as data (memoized on the event)."""
    memo = event.memo
    if _POST_DATA not in memo:
        memo[_POST_DATA] = parse_body(event.post_data, event.post_data_mime)
    return memo[_POST_DATA]


def response_content(event: NetworkEvent) -> dict[str, Any] | None:
    """The event's response body as data (memoized on the event)."""
    memo = event.memo
    if _RESPONSE_CONTENT not in memo:
        memo[_RESPONSE_CONTENT] = parse_body(event.response_body, event.response_mime)
    return memo[_RESPONSE_CONTENT]
