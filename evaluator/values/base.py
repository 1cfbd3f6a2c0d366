"""The base of every normalized value type.

A normalized value holds one or more *alternatives* (a list of two or more raw
values in a task's expected data means "any of these"); two values are equal
when their alternatives overlap, which keeps equality symmetric. Strings are
cleaned the same way for every type before type-specific parsing, so "Café™",
"cafe" and " CAFE " compare equal.
"""

from __future__ import annotations

import contextlib
import re
import unicodedata
from collections.abc import Callable
from functools import lru_cache
from typing import Any, ClassVar

from unidecode import unidecode

from webarena_live.evaluator.errors import NormalizationError

# Hyphen-like characters become spaces only next to a letter ("Buffalo-Niagara"
# -> "buffalo niagara") so that numbers such as "555-1234" keep their shape.
_HYPHENS = "[\u002d\u2010\u2011\u2012\u2013\u2014\u2015\u2212\u00ad]"
_LETTER_HYPHEN = re.compile(rf"(?<=[a-zA-Z]){_HYPHENS}|{_HYPHENS}(?=[a-zA-Z])")
_SPACES = re.compile(r"\s+")
# Trade marks carry no meaning for comparison; drop them before NFKC turns ™ into "TM".
_MARKS = {0x2122: None, 0x00AE: None, 0x2120: None, 0x00A9: None}

DerenderUrl = Callable[..., str]
"""`derender(url, strict=False) -> str`: replaces a real site base URL by its placeholder."""


def is_regexp(value: Any) -> bool:
    """A string written as `^...$` is a regular expression, not a literal."""
    return isinstance(value, str) and len(value) >= 2 and value.startswith("^") and value.endswith("$")


def clean_text(text: str, derender_url: DerenderUrl | None = None) -> str:
    """Fold a string to the comparable form shared by every type.

    Regular expressions are returned untouched so they still match.
    """
    if not text or is_regexp(text):
        return text
    if derender_url is not None and "http" in text:
        with contextlib.suppress(Exception):  # best effort: a string that is not a site URL stays as it is
            text = derender_url(text, strict=False)
    return _fold(text)


@lru_cache(maxsize=1 << 16)
def _fold(text: str) -> str:
    """The folding itself, cached: the same expected strings are folded at every evaluation."""
    text = text.translate(_MARKS)
    text = unicodedata.normalize("NFKC", text)
    text = _LETTER_HYPHEN.sub(" ", text)
    text = "".join(
        (" " if ch in "\t\n\r" else "") if unicodedata.category(ch).startswith("C") else ch for ch in text
    )
    text = unidecode(text).encode("ascii", "ignore").decode("ascii")
    return _SPACES.sub(" ", text.strip()).casefold()


class Normalized:
    """One normalized value, possibly with alternatives.

    Subclasses set `type_name` (the schema `type`/`format` they serve) and
    implement `_parse`, which turns one cleaned raw value into the comparable
    form or raises `NormalizationError`.
    """

    type_name: ClassVar[str] = ""

    __slots__ = ("alternatives", "derender_url", "options", "raw")

    def __init__(self, raw: Any, *, derender_url: DerenderUrl | None = None, **options: Any) -> None:
        self.raw = raw
        self.derender_url = derender_url
        self.options = options
        if isinstance(raw, list | tuple):
            if len(raw) < 2:
                raise NormalizationError(
                    f"alternatives need two or more values, got {raw!r}; give a single value directly"
                )
            self.alternatives = tuple(self._normalize_one(item) for item in raw)
        else:
            self.alternatives = (self._normalize_one(raw),)

    def _normalize_one(self, value: Any) -> Any:
        if isinstance(value, str):
            value = self._clean(value)
        return self._parse(value)

    def _clean(self, text: str) -> str:
        """String folding applied before `_parse`; types whose text is case- or
        byte-sensitive (base64, markdown, null markers) override it."""
        return clean_text(text, self.derender_url)

    def _parse(self, value: Any) -> Any:
        raise NotImplementedError

    def _error(self, value: Any, reason: str) -> NormalizationError:
        """The error a `_parse` raises: names the value, the type and what is wrong."""
        kind = self.type_name or type(self).__name__
        return NormalizationError(f"cannot read {value!r} as {kind}: {reason}")

    @property
    def normalized(self) -> Any:
        """The first alternative: what reports show."""
        return self.alternatives[0]

    @property
    def is_regexp(self) -> bool:
        return any(is_regexp(str(alt)) for alt in self.alternatives)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, self.__class__):
            return False
        return bool(set(self.alternatives) & set(other.alternatives))

    def __hash__(self) -> int:
        if len(self.alternatives) == 1:
            return hash(str(self.alternatives[0]))
        try:
            return hash(str(tuple(sorted(self.alternatives))))
        except TypeError:
            return hash(str(self.alternatives))

    def __repr__(self) -> str:
        shown = self.normalized if len(self.alternatives) == 1 else list(self.alternatives)
        return f"{type(self).__name__}({self.raw!r} -> {shown!r})"

    def __str__(self) -> str:
        return str(self.normalized)
