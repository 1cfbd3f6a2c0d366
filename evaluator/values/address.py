"""US postal addresses (`full_address`).

An address is an object with `house_number`, `street`, `city`, `state` and
`postcode` (and optionally `name`). It is standardised the way the US Postal
Service writes addresses (usaddress-scourgify: "Main Street" -> "MAIN ST",
"South" -> "S"), states become their two-letter code ("California" -> "CA",
via the `us` package) and ZIP codes 5 or 5+4 digits. Two addresses are equal
when the five required parts are; the name is kept for reports only.
"""

from __future__ import annotations

import re
from typing import Any

from webarena_live.evaluator.values.base import Normalized
from webarena_live.evaluator.values.text import LocationName, Text

REQUIRED_PARTS = ("house_number", "street", "city", "state", "postcode")


def state_code(value: Any) -> str:
    """ "California", "calif." or "CA" -> "CA"."""
    import us

    text = str(value).strip() if value is not None else ""
    if not text:
        raise ValueError("the state is empty")
    state = us.states.lookup(text)
    if state is None:
        raise ValueError(f"no US state is called {text!r}")
    return str(state.abbr)


def zip_code(value: Any) -> str:
    """Digits only, as "12345" or "12345-6789"."""
    digits = re.sub(r"\D", "", str(value).strip()) if value is not None else ""
    if len(digits) == 5:
        return digits
    if len(digits) == 9:
        return f"{digits[:5]}-{digits[5:]}"
    raise ValueError(f"a ZIP code has 5 or 9 digits, {value!r} has {len(digits)}")


class FullAddress(Normalized):
    """A US address standardised to USPS abbreviations; compared on its required parts."""

    type_name = "full_address"
    __hash__ = Normalized.__hash__

    def _parse(self, value: Any) -> dict[str, Any]:
        if not value:
            raise self._error(value, "empty")
        if not isinstance(value, dict):
            raise self._error(value, f"an address must be an object with {', '.join(REQUIRED_PARTS)}")
        missing = [part for part in REQUIRED_PARTS if part not in value]
        if missing:
            raise self._error(value, f"missing {', '.join(missing)}")
        try:
            return self._standardise(value)
        except (ValueError, TypeError) as error:
            raise self._error(value, str(error)) from error

    @staticmethod
    def _standardise(value: dict[str, Any]) -> dict[str, Any]:
        from scourgify import normalize_address_record

        usps = dict(
            normalize_address_record(
                {
                    "address_line_1": f"{value['house_number']} {value['street']}".strip(),
                    "city": value["city"],
                    "state": value["state"],
                    "postal_code": value["postcode"],
                }
            )
        )
        number, _, street = (usps.get("address_line_1") or "").strip().partition(" ")
        if not street.strip():
            raise ValueError(f"cannot split {usps.get('address_line_1')!r} into a number and a street")
        name = value.get("name")
        parts: dict[str, Any] = {
            "house_number": Text(number).normalized if number else "",
            "street": Text(street).normalized,
            "city": Text(usps.get("city", value["city"])).normalized,
            "state": state_code(usps.get("state", value["state"])),
            "postcode": zip_code(usps.get("postal_code", value["postcode"])),
            "name": LocationName(name).normalized if name else None,
        }
        empty = [part for part in REQUIRED_PARTS if not parts[part]]
        if empty:
            raise ValueError(f"{', '.join(empty)} empty after standardisation")
        return parts

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FullAddress):
            return False
        return all(self.normalized[part] == other.normalized[part] for part in REQUIRED_PARTS)
