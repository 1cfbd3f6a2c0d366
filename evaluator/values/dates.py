"""Calendar values: dates, months and durations.

`date` reads any notation python-dateutil understands, month first when
ambiguous ("01/05/2023" is January 5), and compares ISO dates. `month` reads
numbers (1-12), names and abbreviations, and whole dates. `duration` reads
"1h 30m", "90 minutes", "1:30" and the like (pytimeparse2), and treats two
durations as equal within max(3 minutes, 10% of the longer one), because
travel times from map services vary.
"""

from __future__ import annotations

import calendar
import re
from datetime import datetime, timedelta
from decimal import Decimal
from functools import lru_cache
from typing import Any, ClassVar

from dateutil import parser as date_parser

from webarena_live.evaluator.values.base import Normalized

_COMMA_WITHOUT_SPACE = re.compile(r",(?! )")
# "1:35 hours" means 1 h 35 min; pytimeparse2 would read "1:35" as minutes:seconds.
_CLOCK_HOURS = re.compile(r"(\d+):(\d+)\s*hours?")
# Month names are read from a date with this default, so only the month comes from the text.
_MONTH_DEFAULT = datetime(2000, 1, 1)


class Date(Normalized):
    """A calendar date, as ISO `YYYY-MM-DD`."""

    type_name = "date"

    def _parse(self, value: Any) -> str:
        if not value:
            raise self._error(value, "empty")
        if not isinstance(value, str):
            raise self._error(value, "a date must be written as text")
        try:
            return _iso_date(value)
        except Exception as error:  # dateutil raises several kinds; all mean "not a date"
            raise self._error(value, str(error)) from error


@lru_cache(maxsize=8192)
def _iso_date(text: str) -> str:
    """dateutil's reading of a date, month first ("01/05/2023" is January 5); cached by text."""
    return date_parser.parse(_COMMA_WITHOUT_SPACE.sub(", ", text), dayfirst=False).date().isoformat()


@lru_cache(maxsize=8192)
def _month_name(text: str) -> str:
    return calendar.month_name[date_parser.parse(text, default=_MONTH_DEFAULT).month]


@lru_cache(maxsize=8192)
def _duration_seconds(text: str) -> Any:
    from pytimeparse2 import parse as parse_duration

    return parse_duration(text)


def _month_from_number(value: Any, number: int) -> str:
    if 1 <= number <= 12:
        return calendar.month_name[number]
    raise ValueError(f"month number out of range (1-12): {value!r}")


class Month(Normalized):
    """A month of the year, as its English name ("January")."""

    type_name = "month"

    def _parse(self, value: Any) -> str:
        if not value and not isinstance(value, int | float | Decimal):
            raise self._error(value, "empty")
        try:
            if isinstance(value, int | float | Decimal):
                if value != int(value):
                    raise ValueError("a month number must be whole")
                return _month_from_number(value, int(value))
            text = str(value).strip()
            if not text:
                raise ValueError("empty")
            try:
                number = int(text)
            except ValueError:
                number = None  # not a bare number: a name, an abbreviation or a date
            if number is not None:
                return _month_from_number(value, number)
            return _month_name(text)
        except Exception as error:  # dateutil raises several kinds; all mean "not a date"
            raise self._error(value, str(error)) from error


class Duration(Normalized):
    """A length of time, compared with a tolerance of max(3 minutes, 10%)."""

    type_name = "duration"
    ABSOLUTE_TOLERANCE_SECONDS: ClassVar[float] = 180.0
    RELATIVE_TOLERANCE: ClassVar[float] = 0.10
    __hash__ = Normalized.__hash__

    def _clean(self, text: str) -> str:
        return _CLOCK_HOURS.sub(r"\1h\2m", super()._clean(text))

    def _parse(self, value: Any) -> timedelta:
        if not value:
            raise self._error(value, "empty")
        if isinstance(value, timedelta):
            return value
        text = str(value)
        try:
            float(text)
        except ValueError:
            pass
        else:
            raise self._error(value, "a duration needs a unit or a clock notation ('5m', '2 hours', '4:13')")
        seconds = _duration_seconds(text)
        if seconds is None:
            raise self._error(value, "not a duration")
        if isinstance(seconds, timedelta):
            return seconds
        return timedelta(seconds=float(seconds))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Duration):
            return False
        for mine in self.alternatives:
            for theirs in other.alternatives:
                a, b = mine.total_seconds(), theirs.total_seconds()
                tolerance = max(self.ABSOLUTE_TOLERANCE_SECONDS, max(a, b) * self.RELATIVE_TOLERANCE)
                if abs(a - b) <= tolerance:
                    return True
        return False
