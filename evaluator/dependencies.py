"""The distributions whose behaviour can change a verdict: the one list of them.

Each is pinned in pyproject.toml to exactly the version the reference (webarena-verified 1.2.3)
pins, or, for a range pin (thefuzz>=0.22.1) and for the parsers they run on that the reference
does not name, to the version its own environment resolves. tests/evaluator/test_dependency_pins.py reads
the reference's requirements from its installed metadata and fails when a pin here, in
pyproject.toml or in the installed environment drifts.

The reference's other requirements are in `NOT_VERDICT_AFFECTING`, each with the reason; the test
fails on a requirement of the reference that is in neither list. Packages the parsers need only for
other work (six, attrs, flexcache, the geocoding stack of usaddress-scourgify) are left to pip.
"""

from __future__ import annotations

from types import MappingProxyType

# distribution name -> what it decides in this project's evaluator
VERDICT_DEPENDENCIES: MappingProxyType[str, str] = MappingProxyType(
    {
        "jsonpath-ng": "JSONPath keys of post_data / response_content",
        "ply": "the parser generator jsonpath-ng builds its JSONPath grammar with",
        "python-dateutil": "dates and months",
        "url-normalize": "URL normalization",
        "idna": "host names in URL normalization (url-normalize)",
        "word2number": "numbers written in words",
        "price-parser": "currency amounts",
        "pint": "distances and their units",
        "flexparser": "the parser of pint's unit definitions",
        "pytimeparse2": "durations",
        "geopy": "coordinates",
        "geographiclib": "the geodesic arithmetic geopy runs on",
        "thefuzz": "fuzzy string similarity",
        "rapidfuzz": "the similarity scores thefuzz returns",
        "us": "US state names and abbreviations",
        "jellyfish": "the phonetic key `us` matches state names by",
        "usaddress-scourgify": "address normalization",
        "usaddress": "address parsing (scourgify's tagger)",
        "python-crfsuite": "the model usaddress tags address parts with",
        "probableparsing": "usaddress's tokenizing helpers",
        "unidecode": "transliteration to ASCII",
    }
)

# the reference's other requirements -> why no verdict of ours depends on their version
NOT_VERDICT_AFFECTING: MappingProxyType[str, str] = MappingProxyType(
    {
        "pydantic": (
            "our own models only type the edges (tasks, configs, results); answers are checked and "
            "typed by our own code before a model sees them, and expected and actual values are "
            "`Any`, so no compared value passes through a pydantic coercion"
        ),
        "beautifulsoup4": "the reference requires it but decides no verdict with it; we do not use it",
        "compact-json": "the reference formats its JSON output files with it; we do not use it",
    }
)
