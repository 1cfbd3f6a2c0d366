"""The URL value type, checked directly and against the oracle's own URL type."""

from __future__ import annotations

import base64
import json
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from tests.support.oracle_bridge import ask_oracle_network
from webarena_live.evaluator.errors import NormalizationError, WebArenaLiveError
from webarena_live.evaluator.sites import SiteMap
from webarena_live.evaluator.values import normalize
from webarena_live.evaluator.values.url import Url, parse_query, split_base64_query

CONFIG = {
    "environments": {
        "__GITLAB__": {"urls": ["http://localhost:8023"]},
        "__SHOPPING_ADMIN__": {"urls": ["http://localhost:7780/admin"]},
        "__SHOPPING__": {"urls": ["http://localhost:7770", "http://shop.example:8080"]},
    }
}
SITES = ["gitlab", "shopping_admin", "shopping"]
SITE_MAP = SiteMap.from_dict(CONFIG)


def make_url(raw: Any, *, strict: bool = False, **options: Any) -> Url:
    return Url(
        raw,
        render_url=partial(SITE_MAP.render, sites=SITES, strict=strict),
        derender_url=partial(SITE_MAP.derender, sites=SITES, strict=strict),
        **options,
    )


DATES = {
    "type": "object",
    "properties": {
        "report_type": {"type": "array", "items": {"type": "string"}},
        "from": {"type": "array", "items": {"type": "string", "format": "date"}},
        "to": {"type": "array", "items": {"type": "string", "format": "date"}},
    },
}

REPORT = base64.urlsafe_b64encode(b"report_type=created_at_order&from=1/1/2022&to=12/31/2022").decode()

URL_CASES: list[dict[str, Any]] = [
    {"url": u}
    for u in [
        "http://localhost:8023/a/b/",
        "HTTP://LOCALHOST:8023/A/B?X=Y&b=2&b=1",
        "http://localhost:80/x",
        "https://h:443/x#frag",
        "http://localhost:8023/a b/c?q=hello world&z=%41",
        "__GITLAB__/dashboard/todos?state=pending",
        "^__GITLAB__/byteblaze/.*$",
        "http://localhost:8023/x;p=1?a",
        "http://localhost:8023",
        "http://localhost:7780/admin/sales/order/",
        "http://shop.example:8080/checkout/cart/?a=1",
        "ssh://git@localhost:2222/Byte/Repo.git",
        "git@localhost:a/B.git",
        "http://other.com/x?y=1",
        "  http://localhost:8023/a  ",
        "",
        "http://localhost:8023/search?q=caf%C3%A9&q=",
        "http://localhost:8023/p?a=1&a=2&a=",
        "http://localhost:8023/%7Euser/",
        "http://localhost:8023/issues/?label_name%5B%5D=help wanted&state=opened",
        f"http://localhost:7780/admin/reports/report_sales/sales/filter/{REPORT}/",
        f"http://localhost:7780/admin/reports/{REPORT}/x?form_key=abc",
    ]
] + [
    {
        "url": "http://localhost:8023/p?page=2&sort=x&q=1&isAjax=true",
        "options": {"ignored_query_params_patterns": ["page", "sort"]},
    },
    {"url": "http://localhost:8023/p?serializer=a&Q=1", "options": {"ignored_query_params": ["serializer"]}},
    {
        "url": "http://localhost:8023/p?price=0-199&cat=3",
        "options": {"ignored_query_params_patterns": ["^(?!price$).+$"]},
    },
    {
        "url": "http://localhost:8023/p?ISAJAX=1",
        "options": {"ignored_query_params_patterns": ["isAjax", "(["]},
    },
    {
        "url": f"http://localhost:7780/admin/reports/report_sales/sales/filter/{REPORT}/?key=1",
        "options": {
            "decode_base64_query": True,
            "ignored_query_params_patterns": ["^(?!report_type$|from$|to$).*$"],
        },
    },
    {"url": "http://localhost:8023/abcd/efgh", "options": {"decode_base64_query": True}},
]


def _ours(case: dict[str, Any]) -> dict[str, Any]:
    try:
        url = make_url(case["url"], **case.get("options", {}))
    except NormalizationError as error:
        return {"error": type(error).__name__}
    return {
        "str": str(url),
        "base_url": url.parts.base_url,
        "query": {k: [str(x) for x in v] for k, v in url.parts.query.items()},
    }


def run_oracle(oracle_python: Path, mode: str, request: dict[str, Any], tmp_path: Path) -> Any:
    request_file = tmp_path / f"{mode}.json"
    request_file.write_text(json.dumps(request))
    return ask_oracle_network(oracle_python, mode, request_file)


def test_normalization_matches_the_oracle(oracle_python: Path, tmp_path: Path) -> None:
    theirs = run_oracle(
        oracle_python, "urls", {"config": CONFIG, "sites": SITES, "cases": URL_CASES}, tmp_path
    )
    for case, expected in zip(URL_CASES, theirs, strict=True):
        ours = _ours(case)
        if "error" in expected:
            assert "error" in ours, case
        else:
            assert ours == expected, case


PAIRS: list[dict[str, Any]] = [
    {"expected": "__GITLAB__/a/B", "actual": "http://localhost:8023/A/b/"},
    {"expected": "__GITLAB__/a", "actual": "http://localhost:8023/a?x=1"},
    {"expected": "__GITLAB__/a?x=1", "actual": "http://localhost:8023/a?x=1"},
    {"expected": "__GITLAB__/a?x=1", "actual": "http://localhost:8023/a?x=2"},
    {"expected": "__GITLAB__/a?x=", "actual": "http://localhost:8023/a"},
    {"expected": "__GITLAB__/a", "actual": "http://localhost:8023/b"},
    {
        "expected": "^__GITLAB__/byteblaze/.*/issues.*$",
        "actual": "http://localhost:8023/byteblaze/x/-/issues/?a=1",
    },
    {"expected": "^__GITLAB__/byteblaze/.*/issues.*$", "actual": "http://localhost:8023/other/x/-/issues"},
    {
        "expected": "^.*/routed-car/route/v1/.*/.*$",
        "actual": "http://localhost:8023/routed-car/route/v1/driving/1,2",
    },
    {"expected": ["__GITLAB__/x", "__GITLAB__/y?z=1"], "actual": "http://localhost:8023/y?z=1"},
    {"expected": ["__GITLAB__/x", "__GITLAB__/y?z=1"], "actual": "http://localhost:8023/y?z=2"},
    {"expected": "__SHOPPING__/cart", "actual": "http://shop.example:8080/cart"},
    {"expected": "__SHOPPING__/cart", "actual": "http://localhost:8023/cart"},
    {
        "expected": "__GITLAB__/dashboard/merge_requests",
        "expected_query": {
            "reviewer_username": ["byteblaze"],
            "scope": ["^(all|)$"],
            "state": ["^(opened|)$"],
        },
        "actual": "http://localhost:8023/dashboard/merge_requests?reviewer_username=ByteBlaze",
    },
    {
        "expected": "__GITLAB__/dashboard/merge_requests",
        "expected_query": {"reviewer_username": ["byteblaze"], "state": ["^(opened|)$"]},
        "actual": "http://localhost:8023/dashboard/merge_requests?reviewer_username=byteblaze&state=closed",
    },
    {
        "expected": "__SHOPPING_ADMIN__/reports/report_sales/sales/filter",
        "expected_query": {"report_type": ["created_at_order"], "from": ["1/1/2022"], "to": ["12/31/2022"]},
        "actual": f"http://localhost:7780/admin/reports/report_sales/sales/filter/{REPORT}/?form_key=1",
        "options": {
            "decode_base64_query": True,
            "ignored_query_params_patterns": ["^(?!report_type$|from$|to$).*$"],
        },
    },
    {
        "expected": "__GITLAB__/search",
        "expected_query": {"q": ["a"], "search": [""]},
        "actual": "http://localhost:8023/search?q=A&search=&page=3",
        "options": {"ignored_query_params_patterns": ["page"]},
    },
    {"expected": "http://other.test/x", "actual": "http://other.test/x"},
] + [
    {
        "expected": "__SHOPPING_ADMIN__/reports/report_sales/sales/filter",
        "expected_query": {"report_type": ["created_at_order"], "from": ["1/1/2022"], "to": ["12/31/2022"]},
        "actual": f"http://localhost:7780/admin/reports/report_sales/sales/filter/?report_type=created_at_order"
        f"&from={start}&to={end}&form_key=x",
        "options": {
            "ignored_query_params_patterns": ["^(?!report_type$|from$|to$).*$"],
            "query_params_schema": DATES,
        },
    }
    for start, end in [("01/01/2022", "12/31/2022"), ("2022-01-01", "2022-12-31"), ("1/2/2022", "12/31/2022")]
]


def _by_schema(schema: dict[str, Any] | None, *, strict: bool) -> Any:
    return partial(normalize, schema=schema, strict=strict) if schema else None


def test_comparison_matches_the_oracle(oracle_python: Path, tmp_path: Path) -> None:
    theirs = run_oracle(
        oracle_python, "url_pairs", {"config": CONFIG, "sites": SITES, "pairs": PAIRS}, tmp_path
    )
    for pair, expected in zip(PAIRS, theirs, strict=True):
        options = dict(pair.get("options", {}))
        schema = options.pop("query_params_schema", None)

        try:
            exp = make_url(
                pair["expected"],
                strict=True,
                query_params=pair.get("expected_query"),
                normalize_query_params=_by_schema(schema, strict=True),
                **options,
            )
            act = make_url(pair["actual"], normalize_query_params=_by_schema(schema, strict=False), **options)
            ours: Any = [exp.compare_path(act), exp == act]
        except WebArenaLiveError as error:
            ours = {"error": type(error).__name__}
        if isinstance(expected, dict):
            assert isinstance(ours, dict), pair
        else:
            assert ours == expected, pair


def test_parse_query_keeps_every_value_sorted() -> None:
    assert parse_query("a=2&a=1&b=&c=%20x+y") == {"a": ("1", "2"), "b": ("",), "c": (" x y",)}
    assert parse_query("") == {}


def test_split_base64_query() -> None:
    encoded = base64.urlsafe_b64encode(b"a=1&b=two").decode().rstrip("=")
    assert split_base64_query(f"/x/{encoded}/y/") == ("/x/y/", ["a=1&b=two"])
    # Segments that are not base64 of a query string stay.
    assert split_base64_query("/abcd/efgh") == ("/abcd/efgh", [])
    assert split_base64_query(f"/{encoded}") == ("/", ["a=1&b=two"])


def test_alternatives_and_reports() -> None:
    url = make_url(["__GITLAB__/x", "__GITLAB__/y?b=2&a=1"])
    assert len(url.alternatives) == 2
    assert url.normalized == {"base_url": "__GITLAB__/x", "query_params": {}}
    assert make_url("http://localhost:8023/y?a=1&b=2") == url
    assert str(make_url("http://localhost:8023/y?b=2&a=1")) == "__GITLAB__/y?a=1&b=2"
    assert make_url("http://localhost:8023/y") == "__GITLAB__/y"
    with pytest.raises(NormalizationError):
        make_url(["only-one"])


def test_strict_render_of_an_unknown_site_fails() -> None:
    with pytest.raises(Exception, match="__REDDIT__"):
        Url("__REDDIT__/f/x", render_url=partial(SITE_MAP.render, sites=["reddit"], strict=True))


def test_non_text_is_not_a_url() -> None:
    with pytest.raises(NormalizationError):
        make_url(42)
