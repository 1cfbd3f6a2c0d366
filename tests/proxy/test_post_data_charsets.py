# ruff: noqa: RUF001, RUF002  (the en dash and other non-ASCII text are what is tested)
"""Request bodies are decoded as the browser encoded them.

`post_data.decode_post_data` is tested directly on the bytes real Chromium sent (measured with
`tests/site/charsets.py`; see tests/e2e/test_form_charsets.py for the live run): UTF-8 when the bytes are
UTF-8, else a declared charset, else UTF-8 with undecodable bytes kept as lone surrogates. Whatever
the case, the exact bytes can be had back.
"""

from __future__ import annotations

import json

import pytest

from tests.support.addon_helpers import SHOP, make_flow
from webarena_live.evaluator.bodies import parse_body
from webarena_live.evaluator.har import event_from_har_entry, event_to_har_entry, event_to_har_json
from webarena_live.evaluator.trace import NetworkEvent
from webarena_live.proxy.capture import BODY_CAP, body_text, event_from_flow
from webarena_live.proxy.post_data import decode_post_data

FIELDS = {
    "message": "six entries – see the table",
    "name": "Crème brûlée, naïve café",
    "city": "東京タワー",
    "note": "thanks 🙂",
}
FORM = "application/x-www-form-urlencoded"
BOUNDARY = "----WebKitFormBoundaryUDZNbTadyn5IMzVO"
MULTIPART = f"multipart/form-data; boundary={BOUNDARY}"
UPLOAD = bytes(range(256)) + b"\x89PNG\r\n\x1a\n\xff\xfe\x00"


def multipart(fields: dict[str, bytes], upload: bytes | None = None) -> bytes:
    """A multipart body as Chromium writes it (field parts, then the file part, if any)."""
    body = b""
    for name, value in fields.items():
        head = f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'
        body += head.encode() + value + b"\r\n"
    if upload is not None:
        body += (
            (
                f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="attachment"; filename="p.bin"\r\n'
                "Content-Type: application/octet-stream\r\n\r\n"
            ).encode()
            + upload
            + b"\r\n"
        )
    return body + f"--{BOUNDARY}--\r\n".encode()


def utf8_fields() -> dict[str, bytes]:
    return {name: value.encode() for name, value in FIELDS.items()}


def as_browser_har(raw: bytes) -> str:
    """Playwright's `record_har` `postData.text`: the bytes read as UTF-8, U+FFFD for the rest."""
    return raw.decode("utf-8", "replace")


def round_trip(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


# -- a UTF-8 page's forms: UTF-8, no charset declared (measured) --------------------------------------


def test_urlencoded_form_of_a_utf8_page():
    raw = (
        b"message=six+entries+%E2%80%93+see+the+table&name=Cr%C3%A8me+br%C3%BBl%C3%A9e%2C+na%C3%AFve+caf%C3%A9"
        b"&city=%E6%9D%B1%E4%BA%AC%E3%82%BF%E3%83%AF%E3%83%BC&note=thanks+%F0%9F%99%82"
    )
    text = decode_post_data(raw, FORM)
    assert text == raw.decode("ascii") == as_browser_har(raw)
    assert parse_body(text, FORM) == FIELDS


def test_urlencoded_body_with_raw_utf8_bytes():
    """Not what a browser sends (it percent-encodes), but a client may: UTF-8, not Latin-1."""
    raw = "message=six entries – see the table".encode()
    assert decode_post_data(raw, FORM) == "message=six entries – see the table"
    assert parse_body(decode_post_data(raw, FORM), FORM) == {"message": FIELDS["message"]}


def test_multipart_form_without_a_file_part():
    raw = multipart(utf8_fields())
    text = decode_post_data(raw, MULTIPART)
    assert text == as_browser_har(raw)
    assert "six entries – see the table" in text
    assert parse_body(text, MULTIPART) == FIELDS
    assert round_trip(text) == raw


def test_multipart_form_with_a_binary_file_part_keeps_its_text_parts_and_every_byte():
    raw = multipart(utf8_fields(), upload=UPLOAD)
    text = decode_post_data(raw, MULTIPART)
    assert round_trip(text) == raw  # the file's bytes are all there
    fields = parse_body(text, MULTIPART)
    assert fields is not None
    assert {name: fields[name] for name in FIELDS} == FIELDS  # the upload garbles no text part
    assert fields["attachment"].encode("utf-8", "surrogateescape") == UPLOAD
    assert "\udcff" in fields["attachment"] and "\ufffd" not in text
    # Playwright's HAR has no postData for a form with a file; where it decodes, it reads so:
    assert text.encode("utf-8", "surrogateescape").decode("utf-8", "replace") == as_browser_har(raw)


def test_text_plain_form():
    raw = "".join(f"{name}={value}\r\n" for name, value in FIELDS.items()).encode()
    text = decode_post_data(raw, "text/plain")
    assert text == as_browser_har(raw) == "".join(f"{name}={value}\r\n" for name, value in FIELDS.items())


def test_json_without_charset():
    raw = json.dumps(FIELDS, ensure_ascii=False, separators=(",", ":")).encode()
    text = decode_post_data(raw, "application/json")
    assert text == as_browser_har(raw)
    assert parse_body(text, "application/json") == FIELDS


# -- declared charsets ---------------------------------------------------------------------------------


def test_declared_utf8():
    raw = json.dumps(FIELDS, ensure_ascii=False).encode()
    for mime in ("application/json; charset=utf-8", "text/plain;charset=UTF-8", 'text/plain; charset="utf8"'):
        assert decode_post_data(raw, mime) == raw.decode()


def test_declared_utf8_with_invalid_bytes_keeps_them():
    raw = b"name=caf\xe9&qty=2"
    text = decode_post_data(raw, f"{FORM}; charset=utf-8")
    assert text == "name=caf\udce9&qty=2"
    assert round_trip(text) == raw


@pytest.mark.parametrize(
    "charset", ["iso-8859-1", "ISO-8859-1", "latin1", "windows-1252", "cp1252", "us-ascii"]
)
def test_declared_latin_charsets_are_read_as_browsers_read_them(charset):
    """A body really in the declared charset (a script built the bytes); labels mean what WHATWG says:
    `iso-8859-1` and `us-ascii` are windows-1252, so 0x96 is an en dash."""
    raw = b"message=six entries \x96 see the table; name=Cr\xe8me br\xfbl\xe9e, na\xefve caf\xe9"
    text = decode_post_data(raw, f"text/plain; charset={charset}")
    assert text == "message=six entries – see the table; name=Crème brûlée, naïve café"
    assert text.encode("cp1252") == raw


def test_declared_windows_1252_keeps_the_bytes_it_has_no_character_for():
    raw = b"a\x81b\x96"  # 0x81 is unassigned in windows-1252
    text = decode_post_data(raw, "text/plain; charset=windows-1252")
    assert text == "a\udc81b–"
    assert text.encode("cp1252", "surrogateescape") == raw


@pytest.mark.parametrize("charset", ["shift_jis", "Shift_JIS", "sjis", "windows-31j", "x-sjis"])
def test_declared_shift_jis(charset):
    raw = b"city=\x93\x8c\x8b\x9e\x83^\x83\x8f\x81[; \x87@"  # 東京タワー, and ① (a Microsoft extension)
    text = decode_post_data(raw, f"text/plain; charset={charset}")
    assert text == "city=東京タワー; ①"
    assert text.encode("cp932") == raw


def test_declared_gbk_is_gb18030():
    raw = "北京".encode("gb18030")
    assert decode_post_data(raw, "text/plain; charset=gbk") == "北京"


def test_a_declared_charset_does_not_override_utf8_bytes():
    """Measured: `fetch()` sends a string body as UTF-8 whatever charset its Content-Type declares
    (XHR rewrites the declaration to UTF-8); the browser's HAR reads it as UTF-8, and so do we."""
    raw = json.dumps(FIELDS, ensure_ascii=False).encode()
    for mime in ("application/json; charset=iso-8859-1", "text/plain; charset=shift_jis"):
        assert decode_post_data(raw, mime) == as_browser_har(raw) == raw.decode()


def test_declared_utf16_goes_first():
    """UTF-16 bytes of ASCII text are valid UTF-8 too; a declared UTF-16 decides."""
    raw = "six – ok".encode("utf-16-le")
    assert decode_post_data(raw, "text/plain; charset=utf-16le") == "six – ok"


def test_unknown_charset_counts_as_none():
    assert decode_post_data("café".encode(), "text/plain; charset=klingon") == "café"
    assert decode_post_data(b"caf\xe9", "text/plain; charset=klingon") == "caf\udce9"


def test_bytes_a_declared_multibyte_charset_cannot_decode_fall_back_to_utf8_kept_bytes():
    raw = b"ab\x81\x20cd\xff"  # 0x81 0x20 is no Shift_JIS character
    text = decode_post_data(raw, "text/plain; charset=shift_jis")
    assert text.encode("cp932", "surrogateescape") == raw


# -- bytes that are not UTF-8 and no charset: another page's charset, or binary -------------------------


def test_form_of_a_windows_1252_page_keeps_its_bytes_and_judges_like_the_browser_har():
    """Measured: a windows-1252 page's multipart form sends 0x96 for an en dash and `&#26481;` for
    東 — and declares no charset. The proxy cannot see the page, so no charset is guessed: the bytes
    are kept; the browser's HAR has U+FFFD in their place, and neither matches "–"."""
    raw = multipart({"message": b"six entries \x96 see the table", "city": b"&#26481;&#20140;"})
    text = decode_post_data(raw, MULTIPART)
    assert round_trip(text) == raw
    assert text.encode("utf-8", "surrogateescape").decode("utf-8", "replace") == as_browser_har(raw)
    fields = parse_body(text, MULTIPART)
    assert fields == {"message": "six entries \udc96 see the table", "city": "&#26481;&#20140;"}
    assert fields["message"] != FIELDS["message"]


def test_invalid_utf8_without_charset():
    for raw in (b"\xff\xfe{", b"caf\xe9", b"\xe2\x80", bytes(range(256))):
        text = decode_post_data(raw, "application/json")
        assert round_trip(text) == raw
        assert "\ufffd" not in text


# -- through capture and the HAR ------------------------------------------------------------------------


def test_capture_stores_utf8_form_posts_as_sent():
    raw = multipart(utf8_fields(), upload=UPLOAD)
    flow = make_flow("POST", f"{SHOP}/contact", headers={"Content-Type": MULTIPART}, body=raw)
    event = event_from_flow(flow)
    assert event.post_data_mime == MULTIPART
    assert event.post_data is not None and round_trip(event.post_data) == raw
    assert parse_body(event.post_data, MULTIPART)["message"] == FIELDS["message"]
    assert body_text(raw, MULTIPART, None, cap=BODY_CAP, post_data=True) == event.post_data


def test_har_export_of_kept_bytes_round_trips_with_their_real_size():
    raw = multipart({"message": b"six entries \x96 see the table"}, upload=UPLOAD)
    event = NetworkEvent("POST", f"{SHOP}/contact", 200, post_data=decode_post_data(raw, MULTIPART),
                         post_data_mime=MULTIPART)  # fmt: skip
    line = event_to_har_json(event)
    assert line.isascii() and json.loads(line) == event_to_har_entry(event)
    entry = json.loads(line)
    assert entry["request"]["bodySize"] == len(raw)
    assert event_from_har_entry(entry).post_data == event.post_data
