"""Values that carry a structure inside a string: JSON, Markdown, base64, comma lists.

These mostly appear in request bodies (`post_data_schema`): a JSON document
sent as a form field, a wiki page or issue text in Markdown, a file uploaded
to GitLab as base64, a list of ids sent as "3,1,2".
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from functools import lru_cache
from typing import Any

from webarena_live.evaluator.values.base import Normalized, is_regexp


class JsonText(Normalized):
    """A JSON document given as text, compared after re-serialising with sorted keys."""

    type_name = "json"

    def _parse(self, value: Any) -> str:
        if not isinstance(value, str):
            raise self._error(value, f"JSON must be given as text, not as a {type(value).__name__}")
        if not value:
            raise self._error(value, "empty")
        try:
            document = json.loads(value)
        except json.JSONDecodeError as error:
            raise self._error(value, f"invalid JSON ({error.msg})") from error
        return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


# Rewrites that make two renderings of the same Markdown text identical, in order.
_MARKDOWN_REWRITES: tuple[tuple[re.Pattern[str], Any], ...] = (
    (re.compile(r"[ \t]+$", re.MULTILINE), ""),  # trailing blanks
    (re.compile(r"\n{3,}"), "\n\n"),  # runs of blank lines
    (re.compile(r"^(\s*)(#{1,6})[ \t]+", re.MULTILINE), r"\1\2 "),  # "##   Title" -> "## Title"
    (re.compile(r"^(\s*)[\*\+][ \t]+", re.MULTILINE), r"\1- "),  # "* item" / "+ item" -> "- item"
    (re.compile(r"^[ \t]+(-)", re.MULTILINE), r"  \1"),  # any list indentation -> two spaces
    # link text broken over two lines: "[a\n b](url)" -> "[a b](url)"
    (
        re.compile(r"\[([^\]]*?)\n\s*([^\]]*?)\](\([^\)]+\))"),
        lambda m: f"[{m.group(1)} {m.group(2)}]{m.group(3)}",
    ),
    (re.compile(r"\[([^\]]+)\]"), lambda m: "[" + " ".join(m.group(1).split()) + "]"),  # spaces in link text
    (re.compile(r"\(\s*([^\)]+?)\s*\)"), r"(\1)"),  # spaces inside "( url )"
)


class MarkdownText(Normalized):
    """Markdown text; case and characters are kept, only layout differences are ironed out."""

    type_name = "markdown"

    def _clean(self, text: str) -> str:
        return text.strip()

    def _parse(self, value: Any) -> str:
        if not isinstance(value, str):
            raise self._error(value, f"Markdown must be text, not a {type(value).__name__}")
        if not value:
            raise self._error(value, "empty")
        text = value.replace("\r\n", "\n").replace("\r", "\n")
        for pattern, replacement in _MARKDOWN_REWRITES:
            text = pattern.sub(replacement, text)
        return text.strip()


@lru_cache(maxsize=1024)
def _compile_multiline(pattern: str) -> re.Pattern[str] | None:
    try:
        return re.compile(pattern, re.DOTALL)
    except re.error:
        return None


class Base64Text(Normalized):
    """Base64-encoded text, compared (and regex-matched, case-sensitively) on its decoded content."""

    type_name = "base64"
    __hash__ = Normalized.__hash__

    def _clean(self, text: str) -> str:
        return text.strip()

    def _parse(self, value: Any) -> str:
        if not isinstance(value, str):
            raise self._error(value, f"base64 must be text, not a {type(value).__name__}")
        if not value:
            raise self._error(value, "empty")
        if is_regexp(value):
            return value.strip()
        try:
            decoded = base64.b64decode(value, validate=True).decode("utf-8")
        except (binascii.Error, ValueError) as error:
            raise self._error(value, "not valid base64 of UTF-8 text") from error
        return decoded.replace("\r\n", "\n").replace("\r", "\n").strip()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Base64Text):
            return False
        for patterns, texts in (
            (self.alternatives, other.alternatives),
            (other.alternatives, self.alternatives),
        ):
            for pattern in patterns:
                compiled = _compile_multiline(pattern) if is_regexp(pattern) else None
                if compiled is not None and any(compiled.fullmatch(text) for text in texts):
                    return True
        return bool(set(self.alternatives) & set(other.alternatives))


class StringList(Normalized):
    """A comma-separated list ("632,64,86"), compared as a sorted set of items."""

    type_name = "string_list"

    def _parse(self, value: Any) -> tuple[str, ...]:
        if not value:
            raise self._error(value, "empty")
        items = [item.strip() for item in str(value).split(",")]
        kept = [item for item in items if item]
        if not kept:
            raise self._error(value, "no items")
        return tuple(sorted(kept))
