"""Keys of expected `post_data` / `response_content` that address nested values.

- `$.note.note` — a JSONPath expression (jsonpath-ng's extended syntax);
- `$.^reply_to_submission_\\d+\\[comment\\]$` or `^...$` — a regular expression
  matched against the top-level keys (for field names that embed ids).

Extraction follows the reference: exactly one match gives the value; several
matches (or a filter expression `?(`) give a tuple; none gives None, or an
error when `strict` (expected values must address something). When a JSONPath
finds nothing, string fields holding JSON text are decoded and searched again
(bodies that carry a JSON document inside a form field). An index into a string field does find
something under jsonpath-ng 1.7.0, the reference's pin: `$.a[2]` is the string's third character, so
JSON text in `a` is not decoded for it (see evaluator/dependencies.py).
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any

from jsonpath_ng.exceptions import JsonPathParserError
from jsonpath_ng.ext import parse

from webarena_live.evaluator.errors import WebArenaLiveError
from webarena_live.evaluator.values.base import is_regexp


class JsonPathError(WebArenaLiveError):
    """An expected key addresses no single value, or is not a valid path or pattern."""


def is_regexp_key(key: str) -> bool:
    """`$.^pattern$`: a regular expression over top-level keys, written like a path."""
    return isinstance(key, str) and key.startswith("$.^") and key.endswith("$")


def is_path_key(key: str) -> bool:
    """Keys that are not plain field names: JSONPath (`$...`) or a bare `^pattern$`."""
    return isinstance(key, str) and (key.startswith("$") or is_regexp(key))


@lru_cache(maxsize=1024)
def _compiled_path(path: str) -> Any:
    return parse(path)


def decode_nested_json(data: Any) -> Any:
    """Decode string values of mappings that hold JSON text; other strings stay."""
    if isinstance(data, dict):
        decoded = {}
        for key, value in data.items():
            if isinstance(value, str):
                try:
                    decoded[key] = json.loads(value)
                except ValueError:
                    decoded[key] = value
            else:
                decoded[key] = decode_nested_json(value)
        return decoded
    if isinstance(data, list):
        return [decode_nested_json(item) for item in data]
    return data


def _by_key_pattern(data: Any, pattern: str, strict: bool) -> Any:
    if not isinstance(data, dict):
        if strict:
            raise JsonPathError(f"key pattern {pattern!r} needs an object, got {type(data).__name__}")
        return None
    try:
        regex = re.compile(pattern)
    except re.error as error:
        if strict:
            raise JsonPathError(f"invalid key pattern {pattern!r}: {error}") from None
        return None
    found = [value for key, value in data.items() if regex.match(key)]
    if len(found) == 1:
        return found[0]
    if strict:
        raise JsonPathError(f"key pattern {pattern!r} matched {len(found)} keys, expected exactly 1")
    return tuple(found) if found else None


def extract(data: Any, key: str, *, strict: bool) -> Any:
    """The value `key` addresses in `data` (see the module docs)."""
    if is_regexp_key(key):
        return _by_key_pattern(data, key[2:], strict)
    if is_regexp(key):
        return _by_key_pattern(data, key, strict)
    try:
        expression = _compiled_path(key)
    except JsonPathParserError as error:  # (lexer errors propagate: the evaluator reports them as errors)
        if strict:
            raise JsonPathError(f"invalid JSONPath {key!r}: {error}") from None
        return None
    matches = expression.find(data)
    if not matches:
        matches = expression.find(decode_nested_json(data))
    if len(matches) == 1 and "?(" not in key:
        return matches[0].value
    if matches:
        return tuple(match.value for match in matches)
    if strict:
        raise JsonPathError(f"JSONPath {key!r} matched nothing, expected exactly 1 value")
    return None
