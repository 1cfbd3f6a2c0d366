"""Spellings of expected values for the value parity tests (tests/evaluator/test_values_parity.py).

Every case is judged by the reference (through tests/support/oracle_values.py) and by
us; the tests assert the verdicts agree. The generators never decide what the
verdict should be: they produce spellings of the expected values, some of
which must match and some of which must not, and the oracle is the judge.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any

from dateutil import parser as date_parser
from pytimeparse2 import parse as parse_duration

MONTHS = [
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
]  # fmt: skip
SMALL_NUMBER_WORDS = [
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen",
]  # fmt: skip
TENS_WORDS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]


def kind_of(schema: dict[str, Any] | None) -> str:
    if not schema:
        return "string"
    return schema.get("format") or schema.get("type") or "string"


def number_words(number: int) -> str | None:
    if 0 <= number < 20:
        return SMALL_NUMBER_WORDS[number]
    if 20 <= number < 100:
        tens, ones = divmod(number, 10)
        return TENS_WORDS[tens] + (f" {SMALL_NUMBER_WORDS[ones]}" if ones else "")
    return None


def is_pair(value: Any) -> bool:
    return (
        isinstance(value, list) and len(value) == 2 and all(isinstance(v, int | float | str) for v in value)
    )


def first_choice(value: Any, schema: dict[str, Any] | None) -> Any:
    """The expected value with every set of alternatives replaced by its first member."""
    schema = schema or {}
    if schema.get("type") == "object":
        if isinstance(value, list):  # alternatives of whole objects
            return first_choice(value[0], schema) if value else value
        if isinstance(value, dict):
            properties = schema.get("properties", {})
            return {key: first_choice(item, properties.get(key)) for key, item in value.items()}
        return value
    if schema.get("type") == "array":
        if isinstance(value, list):
            return [first_choice(item, schema.get("items")) for item in value]
        return value
    if kind_of(schema) == "coordinates" and (is_pair(value) or isinstance(value, dict)):
        return value
    if isinstance(value, list):
        return first_choice(value[0], schema) if value else value
    return value


def _string_spellings(value: Any) -> list[Any]:
    if not isinstance(value, str):
        return [str(value), value, None]
    text = value
    out: list[Any] = [
        text.upper(),
        text.lower(),
        text.title(),
        f"  {text}  ",
        f"{text}.",
        f'"{text}"',
        text.replace(" ", "  "),
        f"{text} extra",
        f"x{text}",
        text.replace("-", " "),
        f"{text}\u2122",
        text[:-1] if len(text) > 1 else "",
        text.replace("e", "\u00e9", 1),
        f"^{re.escape(text[:3])}.*$",
        "",
        "N/A",
        f"{text},{text}",
    ]
    return out


def _number_spellings(value: Any) -> list[Any]:
    try:
        number = float(str(value).replace(",", ""))
    except ValueError:
        return [value, str(value).upper(), None, "a lot"]
    whole = int(number) if number == int(number) else None
    out: list[Any] = [str(value), f"{number:,}", number + 1, number, f" {value} ", "", None, f"{value} items"]
    if whole is not None:
        out += [whole, str(whole), f"{whole}.0"]
        words = number_words(whole)
        if words:
            out += [words, words.upper()]
    return out


def _currency_spellings(value: Any) -> list[Any]:
    try:
        amount = float(str(value).replace(",", "").replace("$", ""))
    except ValueError:
        return [value, str(value), None]
    return [
        f"${amount:,.2f}",
        f"{amount} USD",
        f"USD {amount}",
        amount + 0.05,
        amount + 0.5,
        str(amount),
        f"{amount:.2f}".replace(".", ","),
        -amount,
        f"-${amount}",
        "free",
        f"\u20ac{amount:,.2f}",
        f"${amount:,.2f}".replace(",", ""),
        round(amount),
        f"{amount:,.2f}".replace(",", "X").replace(".", ",").replace("X", "."),
        0,
        "",
    ]


def _date_spellings(value: Any) -> list[Any]:
    try:
        day = date_parser.parse(str(value)).date()
    except (ValueError, OverflowError):
        return [value, str(value).upper(), None]
    formats = [
        "%Y-%m-%d",
        "%b %d, %Y",
        "%B %d, %Y",
        "%m/%d/%Y",
        "%d/%m/%Y",
        "%d %B %Y",
        "%Y/%m/%d",
        "%b %d,%Y",
        "%A, %B %d, %Y",
        "%m-%d-%Y",
        "%Y%m%d",
    ]
    out: list[Any] = [day.strftime(f) for f in formats]
    out += [
        (day + timedelta(days=1)).isoformat(),
        f"{day.isoformat()}T10:00:00",
        f"{day.day}th of {MONTHS[day.month - 1]} {day.year}",
        day.strftime("%b %d"),
        "yesterday",
        "",
        20230105,
    ]
    return out


def _month_spellings(value: Any) -> list[Any]:
    text = str(value).strip().lower()
    number = next((i for i, name in enumerate(MONTHS, 1) if name.lower().startswith(text[:3])), None)
    if number is None:
        try:
            number = int(text)
        except ValueError:
            return [value, None]
    if not 1 <= number <= 12:
        return [value, None]
    name = MONTHS[number - 1]
    return [
        name,
        name[:3],
        str(number),
        f"{number:02d}",
        name.upper(),
        number,
        float(number),
        MONTHS[number % 12],
        f"{name} 2023",
        f"2023-{number:02d}",
        f"{name[:3]}.",
        13,
        0,
        "",
        number + 0.5,
    ]


def _duration_spellings(value: Any) -> list[Any]:
    seconds = parse_duration(str(value)) if value else None
    if seconds is None:
        return [value, str(value).upper(), "1 hour", None]
    seconds = float(seconds)
    hours, rest = divmod(int(seconds), 3600)
    minutes = rest // 60
    return [
        f"{hours}h {minutes}m",
        f"{int(seconds // 60)} minutes",
        f"{seconds / 3600:.1f} hours",
        f"{int(seconds)} seconds",
        f"{int((seconds + 120) // 60)} min",
        f"{int(seconds * 1.3 // 60)} minutes",
        str(int(seconds // 60)),
        f"{hours}:{minutes:02d} hours",
        f"{hours}:{minutes:02d}",
        f"{hours} hours {minutes} minutes",
        f"{hours} hr {minutes} min",
        f"{int(seconds * 0.85 // 60)} min",
        f"{hours}h{minutes}m",
        "",
        "soon",
    ]


_DISTANCE = re.compile(r"([\d.]+)\s*(km|kilometers?|m|meters?|mi|miles?)\b", re.IGNORECASE)


def _distance_spellings(value: Any) -> list[Any]:
    found = _DISTANCE.search(str(value))
    if not found:
        return [value, str(value).upper(), "5 km", None]
    number, unit = float(found.group(1)), found.group(2).lower()
    metres = number * (1000 if unit.startswith("k") else 1609.344 if unit.startswith("mi") else 1)
    km = metres / 1000
    return [
        f"{km:.1f} km",
        f"{km:.2f}km",
        f"{metres / 1609.344:.2f} miles",
        f"{metres:.0f} m",
        f"{km:.1f}k",
        f"{km * 1.015:.2f} km",
        f"{km * 1.1:.2f} km",
        f"{km:.1f}",
        f"{metres + 8:.0f} meters",
        f"{km:.1f} KM",
        f"{metres / 0.3048:.0f} ft",
        "",
        "far",
    ]


def _coordinate_spellings(value: Any) -> list[Any]:
    if is_pair(value):
        lat, lon = float(value[0]), float(value[1])
    elif isinstance(value, dict) and len(value) >= 2:
        lat, lon = (float(v) for v in list(value.values())[:2])
    else:
        return [value, None, "0, 0"]
    ns, ew = ("N" if lat >= 0 else "S"), ("E" if lon >= 0 else "W")
    return [
        [lat, lon],
        f"{lat}, {lon}",
        {"lat": lat, "lon": lon},
        {"latitude": lat, "lng": lon},
        [lat + 1e-6, lon],
        [lat + 0.01, lon],
        f"{abs(lat)} {ns}, {abs(lon)} {ew}",
        [str(lat), str(lon)],
        [lon, lat],
        {"la": lat, "lo": lon},
        {"x": lat, "y": lon},
        f"{lat},{lon}",
        "",
        [lat, lon, 0],
    ]


def _location_spellings(value: Any) -> list[Any]:
    text = str(value)
    words = text.split()
    return [
        text.upper(),
        " ".join(reversed(words)),
        " ".join(words[:2]),
        f"{text} Hotel",
        text[: max(1, len(text) * 6 // 10)],
        "Somewhere Else Entirely",
        text.replace(" ", ""),
        f"The {text}",
        "",
        None,
    ]


def _boolean_spellings(value: Any) -> list[Any]:
    truth = value if isinstance(value, bool) else str(value).lower() in {"true", "yes"}
    return [
        str(truth).lower(),
        "yes" if truth else "no",
        str(truth).upper(),
        int(truth),
        not truth,
        "maybe",
        "Y",
        "off",
        1.0 if truth else 0.0,
        "",
        None,
        [truth],
    ]


def _url_spellings(value: Any) -> list[Any]:
    text = str(value)
    return [
        text,
        f"{text}/",
        f"{text}?utm=1",
        text.upper(),
        text.replace("__", ""),
        f"{text}#top",
        "",
        "not a url",
    ]


SPELLINGS = {
    "string": _string_spellings,
    "number": _number_spellings,
    "integer": _number_spellings,
    "currency": _currency_spellings,
    "date": _date_spellings,
    "month": _month_spellings,
    "duration": _duration_spellings,
    "distance": _distance_spellings,
    "coordinates": _coordinate_spellings,
    "location-name": _location_spellings,
    "boolean": _boolean_spellings,
    "url": _url_spellings,
}


def spellings(value: Any, schema: dict[str, Any] | None) -> list[Any]:
    """Other ways to write `value` (first alternative already chosen), right and wrong ones."""
    schema = schema or {}
    if schema.get("type") == "object" and isinstance(value, dict):
        properties = schema.get("properties", {})
        out: list[Any] = []
        for key, item in value.items():
            for variant in spellings(item, properties.get(key))[:8]:
                out.append({**value, key: variant})
        out.append({k: v for k, v in list(value.items())[1:]})  # a key missing
        out.append({**value, "unexpected": "extra"})
        out.append(json.dumps(value))  # the object sent as JSON text
        return out
    if schema.get("type") == "array":
        return [value[::-1] if isinstance(value, list) else value, value, None]
    return SPELLINGS.get(kind_of(schema), _string_spellings)(value)
