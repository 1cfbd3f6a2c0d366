"""Places on a map: distances and coordinates.

`distance` needs a unit ("5 km", "3.1 miles", "110k"), is converted to metres
with pint, and two distances are equal within max(10 m, 2%). `coordinates`
reads `{"lat": .., "lon": ..}` objects (any prefix of latitude/longitude, or
"lng"), `[lat, lon]` pairs and the text notations geopy understands
("40.44, -79.94", "40.44 N, 79.94 W"), and compares within 1e-5 degrees.
"""

from __future__ import annotations

import re
from decimal import Decimal
from functools import cache, lru_cache
from typing import Any, ClassVar

from webarena_live.evaluator.values.base import Normalized

# "110k" is how map sites abbreviate kilometres; pint would read "k" as nothing useful.
_KILO_SUFFIX = re.compile(r"(\d+(?:\.\d+)?)\s*k(?=\s|$)", re.IGNORECASE)


@cache
def _units() -> Any:
    """pint's unit registry, built once on first use (building it takes a noticeable moment)."""
    import pint

    return pint.UnitRegistry()


@lru_cache(maxsize=8192)
def _metres(text: str) -> Decimal:
    units = _units()
    return Decimal(str(units.parse_expression(text).to(units.meter).magnitude))


class Distance(Normalized):
    """A length, in metres, compared with a tolerance of max(10 m, 2%)."""

    type_name = "distance"
    ABSOLUTE_TOLERANCE_METERS: ClassVar[Decimal] = Decimal("10")
    RELATIVE_TOLERANCE: ClassVar[Decimal] = Decimal("0.02")
    __hash__ = Normalized.__hash__

    def _parse(self, value: Any) -> Decimal:
        if not value and not isinstance(value, int | float | Decimal):
            raise self._error(value, "empty")
        text = _KILO_SUFFIX.sub(r"\1 km", str(value))
        try:
            float(text)
        except ValueError:
            pass
        else:
            raise self._error(value, "a distance needs a unit (m, km, mi, ft)")
        try:
            return _metres(text)
        except Exception as error:  # unknown unit, not a length, or not an expression at all
            raise self._error(value, str(error)) from error

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Distance):
            return False
        for mine in self.alternatives:
            for theirs in other.alternatives:
                tolerance = max(self.ABSOLUTE_TOLERANCE_METERS, max(mine, theirs) * self.RELATIVE_TOLERANCE)
                if abs(mine - theirs) <= tolerance:
                    return True
        return False


def _coordinate_key(data: dict[Any, Any], *, latitude: bool) -> Any:
    """The key of `data` that names the latitude (or longitude): a 2+ letter prefix of the word, or "lng"."""
    word = "latitude" if latitude else "longitude"
    for key in data:
        if not isinstance(key, str):
            continue
        folded = key.lower()
        if len(folded) >= 2 and word.startswith(folded):
            return key
        if not latitude and folded == "lng":
            return key
    return None


def _is_pair(value: Any) -> bool:
    return (
        isinstance(value, list | tuple)
        and len(value) == 2
        and all(isinstance(part, int | float | str) for part in value)
    )


class Coordinates(Normalized):
    """A point as `{"latitude": float, "longitude": float}`, compared within 1e-5 degrees.

    A two-item list of numbers (or strings) is one `[lat, lon]` point, not two
    alternatives. Like the reference, only the first alternative is compared.
    """

    type_name = "coordinates"
    TOLERANCE_DEGREES: ClassVar[float] = 1e-5

    def __init__(self, raw: Any, **options: Any) -> None:
        if _is_pair(raw):
            self.raw = raw
            self.derender_url = options.pop("derender_url", None)
            self.options = options
            self.alternatives = (self._normalize_one(raw),)
            return
        super().__init__(raw, **options)

    def _parse(self, value: Any) -> dict[str, float]:
        if not value:
            raise self._error(value, "empty")
        from geopy import Point

        try:
            if isinstance(value, Point):
                point = value
            elif isinstance(value, dict):
                lat_key = _coordinate_key(value, latitude=True)
                lon_key = _coordinate_key(value, latitude=False)
                if lat_key is None or lon_key is None:
                    raise ValueError("an object needs a latitude key and a longitude key")
                point = Point(latitude=value[lat_key], longitude=value[lon_key])
            elif isinstance(value, list | tuple) and len(value) == 2:
                point = Point(latitude=value[0], longitude=value[1])
            elif isinstance(value, str):
                point = Point(value)
            else:
                raise ValueError(f"a {type(value).__name__} is not a point")
        except (ValueError, TypeError, AttributeError) as error:
            raise self._error(value, str(error)) from error
        if not -90.0 <= point.latitude <= 90.0:
            raise self._error(value, f"latitude {point.latitude} is outside -90..90")
        return {"latitude": point.latitude, "longitude": point.longitude}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Coordinates):
            return False
        mine, theirs = self.normalized, other.normalized
        return (
            abs(mine["latitude"] - theirs["latitude"]) <= self.TOLERANCE_DEGREES
            and abs(mine["longitude"] - theirs["longitude"]) <= self.TOLERANCE_DEGREES
        )

    def __hash__(self) -> int:
        return hash((self.normalized["latitude"], self.normalized["longitude"]))
