"""Free text: plain strings (`string`) and place names (`location-name`).

Plain strings compare after the shared folding (case, accents, trade marks,
whitespace), may be regular expressions (`^...$`, matched without regard to
case against the other side), and tolerate stray quotes or sentence
punctuation at either end ("Paris." equals "paris"). Place names are matched
fuzzily, word order aside, because agents abbreviate them ("Univ" for
"University").
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from webarena_live.evaluator.values.base import Normalized, is_regexp

# Characters an answer often carries around the value itself: quotes and sentence punctuation.
_WRAPPING = "'\"`.,;:!?"
# token_sort_ratio score (0-100) from which two place names count as the same place.
PLACE_NAME_THRESHOLD = 80


@lru_cache(maxsize=4096)
def _compile_ignoring_case(pattern: str) -> re.Pattern[str] | None:
    """A regex value compiled once; None when it is not a valid pattern (then it is a literal)."""
    try:
        return re.compile(pattern, re.IGNORECASE)
    except re.error:
        return None


def _regex_matches(patterns: tuple[str, ...], texts: tuple[str, ...]) -> bool:
    for pattern in patterns:
        if not is_regexp(pattern):
            continue
        compiled = _compile_ignoring_case(pattern)
        if compiled is not None and any(compiled.fullmatch(text) for text in texts):
            return True
    return False


def unwrap(text: str) -> str:
    """Drop quotes and punctuation around a value: '"Paris."' -> 'Paris'."""
    return text.strip(_WRAPPING) if text else text


class Text(Normalized):
    """A plain string, compared case-insensitively, with regex and punctuation tolerance."""

    type_name = "string"
    __hash__ = Normalized.__hash__

    def _parse(self, value: Any) -> str:
        # Falsy values (None, 0, False, "") all read as the empty string, as in the reference.
        if not value:
            return ""
        if is_regexp(value):
            return str(value).strip()
        return str(value).lower().strip()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            # A raw string on the other side (an actual value that kept its raw form) is read as text.
            other = Text(other)
        if not isinstance(other, Text):
            return False
        mine, theirs = self.alternatives, other.alternatives
        if _regex_matches(mine, theirs) or _regex_matches(theirs, mine):
            return True
        if set(mine) & set(theirs):
            return True
        return bool({unwrap(t) for t in mine} & {unwrap(t) for t in theirs})


class LocationName(Normalized):
    """A place name, equal to another when their sorted-word similarity reaches 80%."""

    type_name = "location-name"
    __hash__ = Normalized.__hash__

    def _parse(self, value: Any) -> str:
        if value is None:
            raise self._error(value, "a place name cannot be null")
        if not value:
            return ""
        return str(value).lower().strip()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LocationName):
            return False
        from thefuzz import fuzz  # imported on first use: it pulls in rapidfuzz

        for mine in self.alternatives:
            for theirs in other.alternatives:
                if not mine or not theirs:
                    if mine == theirs:
                        return True
                    continue
                if fuzz.token_sort_ratio(mine, theirs) >= PLACE_NAME_THRESHOLD:
                    return True
        return False
