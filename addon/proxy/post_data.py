"""Request bodies decoded as the browser encoded them.

Measured with Chromium 156 (docs/notes/live-findings.md, tests/e2e/test_form_charsets.py): a form is sent
in the charset of its page — UTF-8 for a UTF-8 page — and no form enctype (urlencoded, multipart,
text/plain) declares a charset; characters the page's charset cannot hold become `&#NNNN;`. Script
bodies made of strings (`fetch`, `XMLHttpRequest`, `JSON.stringify`) are always UTF-8, whatever
charset the page has and whatever charset the script declares in the Content-Type (XHR even rewrites
it to UTF-8). The browser's own HAR (Playwright `record_har`) decodes every body as UTF-8, with
U+FFFD for bytes that are not. mitmproxy's `infer_content_encoding` instead falls back to Latin-1
for every undeclared form body, which garbles each UTF-8 form with non-ASCII text.
"""

from __future__ import annotations

import codecs
import re

from webarena_live.evaluator import BoundedMemo

_CHARSET_PARAMETER = re.compile(r";\s*charset\s*=\s*[\"']?([^\"';\s]+)", re.IGNORECASE)

_WHATWG_CODECS = {
    # Labels browsers read as a superset of what Python's codec of that name decodes.
    "iso8859-1": "cp1252",
    "ascii": "cp1252",
    "iso8859-9": "cp1254",
    "shift_jis": "cp932",
    "windows-31j": "cp932",
    "x-sjis": "cp932",
    "gb2312": "gb18030",
    "gbk": "gb18030",
    "x-gbk": "gb18030",
    "euc_kr": "cp949",
    "big5": "big5hkscs",
}
"""Python codec names (after `codecs.lookup`) -> the codec that decodes what the WHATWG Encoding Standard's
encoder of that label writes (e.g. `iso-8859-1` means windows-1252 there)."""


def _declared_codec(content_type: str) -> tuple[str | None, bool]:
    """(Python codec of the declared charset or None, whether valid UTF-8 bytes are read as UTF-8 first)."""
    match = _CHARSET_PARAMETER.search(content_type)
    if match is None:
        return None, True
    label = match.group(1).lower()
    try:
        name = _WHATWG_CODECS.get(label) or codecs.lookup(label).name
    except LookupError:
        return None, True  # an unknown charset is no information
    codec = _WHATWG_CODECS.get(name, name)
    # Only a charset that cannot be mistaken for UTF-8 (its ASCII text is not ASCII bytes) goes first.
    return codec, not codec.startswith(("utf-16", "utf-32"))


_declared_codecs: BoundedMemo[str, tuple[str | None, bool]] = BoundedMemo(_declared_codec)


def decode_post_data(content: bytes, content_type: str) -> str:
    """A request body as text, decoded as the browser encoded it.

    1. Bytes that are valid UTF-8 are UTF-8, with or without a declared
       charset: a UTF-8 page's forms and every string body a script sends are
       UTF-8 (a declared charset does not change what Chromium sends), and
       the browser's own HAR reads them so.
    2. Otherwise a declared charset is honoured (first of all a UTF-16/32 one,
       whose bytes would pass for UTF-8), under the WHATWG meaning of its
       label (`iso-8859-1` is windows-1252, `shift_jis` is Microsoft's).
    3. Otherwise — no charset, a charset Python does not know, or bytes the
       declared one cannot decode — UTF-8, each undecodable byte kept as a
       lone surrogate (`surrogateescape`, as header bytes are kept). No form
       of a page in another charset is guessed at: the proxy cannot see the
       page. The browser's HAR has U+FFFD there, so a task judges such a
       body the same way on either.

    Bytes are never lost: `text.encode("utf-8", "surrogateescape")` gives the
    body back in cases 1 and 3, `text.encode(codec, "surrogateescape")` in 2.
    """
    codec, utf8_first = _declared_codecs[content_type]
    if utf8_first:
        try:
            return content.decode("utf-8")
        except UnicodeDecodeError:
            pass
    if codec is not None:
        try:
            return content.decode(codec, "surrogateescape")
        except UnicodeDecodeError:  # a byte below 0x80 it cannot take: surrogates cannot keep it
            pass
    return content.decode("utf-8", "surrogateescape")
