"""Numbers, money, yes/no answers and "no value" markers.

`number` (and `integer`, which the reference reads the same way) accepts
numerals with thousands separators and number words ("twenty three").
`currency` reads prices in any notation ("$1,234.50", "1.234,50 EUR", "-$5")
and treats amounts within ten cents as equal. `boolean` reads yes/no words.
`null` accepts the usual spellings of "nothing" ("N/A", "none", "").
"""

from __future__ import annotations

import re
from decimal import Decimal
from functools import lru_cache
from typing import Any, ClassVar

from webarena_live.evaluator.values.base import Normalized

_TRUE_WORDS = frozenset({"true", "yes", "y", "1", "t", "on"})
_FALSE_WORDS = frozenset({"false", "no", "n", "0", "f", "off"})
_NOTHING_WORDS = frozenset({"n/a", "na", "nan", "null", "none"})
_SPACE_RUNS = re.compile(r"\s+")
_SPACED_SLASH = re.compile(r"\s*/\s*")


def _is_numeric(value: Any) -> bool:
    return isinstance(value, int | float | Decimal)


class Number(Normalized):
    """A plain number, kept as a float and compared exactly."""

    type_name = "number"

    def _parse(self, value: Any) -> float:
        if not value and not _is_numeric(value):
            raise self._error(value, "empty")
        if isinstance(value, int | float):
            return float(value)
        # "1,234.5" and "1 000" are numerals with separators, not lists.
        compact = str(value).replace(",", "").replace(" ", "")
        try:
            return float(compact)
        except ValueError:
            pass
        from word2number import w2n  # number words: "twenty three" -> 23

        try:
            return float(w2n.word_to_num(str(value)))
        except Exception as error:
            raise self._error(value, "neither a numeral nor number words") from error


class Boolean(Normalized):
    """A truth value; yes/no/on/off/t/f/1/0 words are read case-insensitively."""

    type_name = "boolean"

    def _parse(self, value: Any) -> bool:
        if not value and not isinstance(value, int | float | bool):
            raise self._error(value, "empty")
        if isinstance(value, bool):
            return value
        if isinstance(value, int | float):
            return bool(value)
        if isinstance(value, str):
            word = value.strip().lower()
            if word in _TRUE_WORDS:
                return True
            if word in _FALSE_WORDS:
                return False
            raise self._error(value, "not a yes/no word")
        raise self._error(value, f"a {type(value).__name__} is not a truth value")


class Empty(Normalized):
    """The absence of a value: null, "", {} or a word such as "N/A" or "none"."""

    type_name = "null"
    __hash__ = Normalized.__hash__

    def _clean(self, text: str) -> str:
        # The shared folding would drop the slash of "N/A"; keep it, only fold case and spaces.
        if not text:
            return text
        text = _SPACE_RUNS.sub(" ", text.strip().lower())
        return _SPACED_SLASH.sub("/", text)

    def _parse(self, value: Any) -> None:
        if not value:
            if _is_numeric(value):
                raise self._error(value, "zero is a value, not the absence of one")
            return None
        if isinstance(value, str) and value in _NOTHING_WORDS:
            return None
        raise self._error(value, "not an empty value (null, '', N/A, none, null, nan)")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Empty)


@lru_cache(maxsize=8192)
def _amount(text: str, decimal_separator: str) -> float | None:
    """price-parser's reading of an amount; cached, the same prices recur at every evaluation."""
    from price_parser import Price

    amount: float | None = Price.fromstring(text, decimal_separator=decimal_separator).amount_float
    return amount


class Currency(Normalized):
    """An amount of money; two amounts within `TOLERANCE` are equal.

    Like the reference, only the first alternative takes part in comparisons.
    """

    type_name = "currency"
    TOLERANCE: ClassVar[Decimal] = Decimal("0.1")

    def _parse(self, value: Any) -> Decimal:
        if not value and not _is_numeric(value):
            raise self._error(value, "empty")
        text = str(value)
        # price-parser drops a leading minus, so the sign is read here.
        negative = text.startswith("-")
        if negative:
            text = text.replace("-", "")
        # Whichever of "." and "," comes last separates the cents: "1.234,50" and "1,234.50".
        separator = "." if text.rfind(".") > text.rfind(",") else ","
        amount = _amount(text, separator)
        if amount is None:
            raise self._error(value, "no amount found")
        result = Decimal(str(amount))
        return -result if negative else result

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Decimal):
            return bool(abs(self.normalized - other) <= self.TOLERANCE)
        if isinstance(other, Currency):
            return bool(abs(self.normalized - other.normalized) <= self.TOLERANCE)
        return False

    def __hash__(self) -> int:
        # Equal amounts (within tolerance) mostly share a bucket; exactness is not needed
        # because comparisons never go through hashing.
        return hash((self.normalized / (self.TOLERANCE * 2)).quantize(Decimal(1)))
