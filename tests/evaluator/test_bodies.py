"""Body parsing (forms, JSON, multipart) and JSONPath / key-pattern extraction."""

from __future__ import annotations

import json

import pytest

from webarena_live.evaluator.bodies import (
    parse_body,
    parse_form,
    parse_multipart,
    post_data,
    response_content,
)
from webarena_live.evaluator.jsonpaths import JsonPathError, extract, is_path_key, is_regexp_key
from webarena_live.evaluator.trace import NetworkEvent

FORM = "application/x-www-form-urlencoded; charset=UTF-8"


def test_form_keeps_first_value_and_blanks() -> None:
    assert parse_form("a=1&a=2&b=&c=x+y%21") == {"a": "1", "b": "", "c": "x y!"}
    assert parse_body("item%5Bqty%5D=3&form_key=k", FORM) == {"item[qty]": "3", "form_key": "k"}


def test_json_only_objects() -> None:
    assert parse_body('{"a": {"b": [1, 2]}}', "application/json") == {"a": {"b": [1, 2]}}
    assert parse_body("[1, 2]", "application/json") is None
    assert parse_body("{broken", "application/json") is None
    # The MIME type decides: JSON text sent as text/plain is not data.
    assert parse_body('{"a": 1}', "text/plain") is None
    # Matched case-sensitively, like the reference.
    assert parse_body('{"a": 1}', "Application/JSON") is None


def test_empty_and_missing() -> None:
    assert parse_body(None, "application/json") is None
    assert parse_body("", FORM) is None
    assert parse_body("a=1", None) is None


def test_multipart_crlf_and_lf() -> None:
    body = (
        '------B\r\nContent-Disposition: form-data; name="title"\r\n\r\nHello\r\n'
        '------B\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\n'
        "Content-Type: text/plain\r\n\r\nline1\r\nline2\r\n"
        "------B--\r\n"
    )
    assert parse_body(body, "multipart/form-data; boundary=----B") == {
        "title": "Hello",
        "file": "line1\r\nline2",
    }
    lf = '--X\nContent-Disposition: form-data; name="a"\n\n1\n--X--'
    assert parse_multipart(lf, "X") == {"a": "1"}
    assert parse_body(body, "multipart/form-data") is None  # no boundary: nothing to split on


def test_bodies_are_memoized_on_the_event() -> None:
    event = NetworkEvent(
        method="POST",
        url="http://h/x",
        status=200,
        post_data="a=1",
        post_data_mime=FORM,
        response_body=json.dumps({"ok": True}),
        response_mime="application/json",
    )
    first = post_data(event)
    assert first == {"a": "1"}
    assert post_data(event) is first
    assert response_content(event) == {"ok": True}
    assert response_content(event) is response_content(event)


DATA = {
    "note": {"noteable_type": "MergeRequest", "note": "lgtm"},
    "items": [{"name": "A", "qty": 1}, {"name": "B", "qty": 2}],
    "reply_to_submission_2[comment]": "good book!",
    "meta": '{"inner": {"x": 5}}',
}


def test_key_kinds() -> None:
    assert is_path_key("$.a") and is_path_key("^a$") and is_path_key("$")
    assert not is_path_key("user_id")
    assert is_regexp_key(r"$.^reply_\d+$") and not is_regexp_key("$.a.b")


def test_jsonpath_extraction() -> None:
    assert extract(DATA, "$.note.note", strict=True) == "lgtm"
    assert extract(DATA, "$.items[1].name", strict=True) == "B"
    assert extract(DATA, "$.items[*].qty", strict=False) == (1, 2)
    assert extract(DATA, "$.items[?(@.qty > 1)].name", strict=False) == ("B",)
    # JSON text inside a field is searched when the plain search finds nothing.
    assert extract(DATA, "$.meta.inner.x", strict=False) == 5
    assert extract(DATA, "$.missing", strict=False) is None
    with pytest.raises(JsonPathError, match="matched nothing"):
        extract(DATA, "$.missing", strict=True)
    assert extract(DATA, "$.[[[", strict=False) is None
    with pytest.raises(JsonPathError, match="invalid JSONPath"):
        extract(DATA, "$.[[[", strict=True)


def test_key_pattern_extraction() -> None:
    assert extract(DATA, r"$.^reply_to_submission_\d+\[comment\]$", strict=True) == "good book!"
    assert extract(DATA, r"^reply_to_submission_\d+\[comment\]$", strict=False) == "good book!"
    assert extract({"k1": 1, "k2": 2}, r"^k\d$", strict=False) == (1, 2)
    with pytest.raises(JsonPathError, match="matched 2 keys"):
        extract({"k1": 1, "k2": 2}, r"^k\d$", strict=True)
    assert extract([1, 2], r"^k$", strict=False) is None
    assert extract({"a": 1}, "^([$", strict=False) is None
