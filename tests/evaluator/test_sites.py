"""SiteMap: loading the reference config, rendering and derendering placeholders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webarena_live.evaluator.errors import SiteConfigError
from webarena_live.evaluator.site_checks import config_problems, placeholder, site_key
from webarena_live.evaluator.sites import SiteMap
from webarena_live.evaluator.trace import NetworkEvent, NetworkTrace

CONFIG = {
    "test_data_file": "ignored.json",
    "environments": {
        "__GITLAB__": {
            "urls": ["http://localhost:8023", "https://gitlab.staging.test/"],
            "active_url_idx": 0,
        },
        "__SHOPPING_ADMIN__": {"urls": ["http://localhost:7780/admin"], "use_header_login": True},
        "shopping": {"urls": ["http://localhost:7770"], "credentials": {"username": "u"}},
    },
}


@pytest.fixture()
def site_map(tmp_path: Path) -> SiteMap:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(CONFIG))
    return SiteMap.load(path)


def test_site_names_are_folded() -> None:
    assert site_key("__SHOPPING_ADMIN__") == "shopping_admin"
    assert site_key("Gitlab") == "gitlab"
    assert placeholder("shopping_admin") == "__SHOPPING_ADMIN__"


def test_load_reads_reference_format_and_ignores_other_keys(site_map: SiteMap) -> None:
    assert set(site_map.environments) == {"gitlab", "shopping_admin", "shopping"}
    assert site_map.active_url("__GITLAB__") == "http://localhost:8023"
    assert site_map.environments["shopping"].active_url_idx == 0
    assert "gitlab" in site_map and "map" not in site_map


def test_round_trip_through_dict(site_map: SiteMap) -> None:
    again = SiteMap.from_dict(site_map.to_dict())
    assert again == site_map
    assert hash(again) == hash(site_map)


def test_render_uses_active_url_and_only_a_leading_placeholder(site_map: SiteMap) -> None:
    assert site_map.render("__GITLAB__/a/b", sites=["gitlab"]) == "http://localhost:8023/a/b"
    assert site_map.render("__SHOPPING_ADMIN__/sales", sites=["shopping_admin", "gitlab"]) == (
        "http://localhost:7780/admin/sales"
    )
    # A placeholder in the middle is not a template to render.
    assert site_map.render("x__GITLAB__", sites=["gitlab"], strict=False) == "x__GITLAB__"
    with pytest.raises(SiteConfigError, match="renders"):
        site_map.render("x__GITLAB__", sites=["gitlab"])


def test_render_with_other_active_index() -> None:
    sites = SiteMap.from_dict(
        {"environments": {"__GITLAB__": {"urls": ["http://a", "http://b"], "active_url_idx": 1}}}
    )
    assert sites.render("__GITLAB__/x") == "http://b/x"
    broken = SiteMap.from_dict({"environments": {"__GITLAB__": {"urls": ["http://a"], "active_url_idx": 3}}})
    with pytest.raises(SiteConfigError, match="index 3"):
        broken.render("__GITLAB__/x")


def test_unconfigured_site_is_an_error_even_when_not_strict(site_map: SiteMap) -> None:
    with pytest.raises(SiteConfigError, match="__MAP__"):
        site_map.render("__MAP__/x", sites=["map"], strict=False)
    with pytest.raises(SiteConfigError, match="no site URLs"):
        SiteMap().derender("http://x", sites=["gitlab"])


def test_derender_accepts_every_url_of_a_site(site_map: SiteMap) -> None:
    sites = ["gitlab", "shopping", "shopping_admin"]
    assert site_map.derender("http://localhost:8023/a?b=1", sites=sites) == "__GITLAB__/a?b=1"
    # The configured trailing slash must be present to match, and is kept out of the result.
    assert site_map.derender("https://gitlab.staging.test/x", sites=sites) == "__GITLAB__/x"
    assert site_map.derender("https://gitlab.staging.test", sites=sites) == "https://gitlab.staging.test"
    # Every occurrence is replaced, e.g. a return URL inside the query.
    assert site_map.derender("http://localhost:7770/r?u=http://localhost:7770/c", sites=sites) == (
        "__SHOPPING__/r?u=__SHOPPING__/c"
    )


def test_derender_prefers_the_most_specific_site(site_map: SiteMap) -> None:
    both = SiteMap.from_dict(
        {
            "environments": {
                "__SHOPPING__": {"urls": ["http://h:7780"]},
                "__SHOPPING_ADMIN__": {"urls": ["http://h:7780/admin"]},
            }
        }
    )
    assert (
        both.derender("http://h:7780/admin/x", sites=["shopping", "shopping_admin"]) == "__SHOPPING_ADMIN__/x"
    )
    assert both.derender("http://h:7780/cart", sites=["shopping", "shopping_admin"]) == "__SHOPPING__/cart"


def test_derender_strict(site_map: SiteMap) -> None:
    assert site_map.derender("http://elsewhere/x", sites=["gitlab"]) == "http://elsewhere/x"
    with pytest.raises(SiteConfigError, match="does not match"):
        site_map.derender("http://elsewhere/x", sites=["gitlab"], strict=True)


def test_malformed_configs_name_the_file(tmp_path: Path) -> None:
    bad_json = tmp_path / "bad.json"
    bad_json.write_text("{nope")
    with pytest.raises(SiteConfigError, match=r"bad\.json.*not valid JSON"):
        SiteMap.load(bad_json)
    with pytest.raises(SiteConfigError, match=r"missing\.json"):
        SiteMap.load(tmp_path / "missing.json")
    bad_urls = tmp_path / "urls.json"
    bad_urls.write_text(json.dumps({"environments": {"__GITLAB__": {"urls": "http://x"}}}))
    with pytest.raises(SiteConfigError, match=r"urls\.json: environments\.__GITLAB__: \"urls\" must be"):
        SiteMap.load(bad_urls)


def _event(url: str) -> NetworkEvent:
    return NetworkEvent(method="GET", url=url, status=200, request_headers=(("accept", "text/html"),))


def test_complete_from_trace_guesses_missing_sites() -> None:
    trace = NetworkTrace(
        [_event("http://h:1/static/app.js"), _event("http://h:1/admin/dashboard"), _event("http://g:2/x")]
    )
    guessed = SiteMap().complete_from_trace(["shopping_admin", "gitlab"], trace)
    assert guessed.active_url("shopping_admin") == "http://h:1/admin"
    assert guessed.active_url("gitlab") == "http://g:2"
    # Fewer events than sites: the last event serves the rest.
    one = SiteMap().complete_from_trace(["gitlab", "reddit", "map"], NetworkTrace([_event("http://g:2/x")]))
    assert one.active_url("map") == "http://g:2"


def test_complete_from_trace_keeps_a_complete_map(site_map: SiteMap) -> None:
    assert site_map.complete_from_trace(["gitlab"], NetworkTrace()) is site_map
    partial = SiteMap.from_urls({"gitlab": "http://configured"})
    guessed = partial.complete_from_trace(["gitlab", "reddit"], NetworkTrace([_event("http://r:9/f")]))
    # Like the reference, the guess replaces the whole map, the configured site included.
    assert guessed.active_url("gitlab") == "http://r:9"


def test_complete_from_trace_without_events_fails() -> None:
    with pytest.raises(SiteConfigError, match="no events"):
        SiteMap().complete_from_trace(["gitlab"], NetworkTrace([_event("http://h/app.css")]))


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        (
            {"environments": {"__SHOPPING__": {"url": ["http://h"]}}},
            "unknown key 'url' (did you mean 'urls'?)",
        ),
        (
            {"environments": {"__SHOPING__": {"urls": ["http://h"]}}},
            "not a WebArena site (did you mean '__SHOPPING__'?)",
        ),
        ({"__SHOPPING__": {"urls": ["http://h"]}}, "unknown key '__SHOPPING__'"),
        ({"__SHOPPING__": {"urls": ["http://h"]}}, '"environments" must be an object of sites (none given)'),
        ({"environments": {"__SHOPPING__": {"urls": ["127.0.0.1:18000"]}}}, "(write http://127.0.0.1:18000)"),
        ({"environments": {"__SHOPPING__": {"urls": ["ftp://h"]}}}, "is not an http(s) URL with a host"),
        ({"environments": {"__SHOPPING__": {"urls": []}}}, '"urls" must be a non-empty list'),
        ({"environment": {}}, "unknown key 'environment' (did you mean 'environments'?)"),
        ([], "the config must be a JSON object, got list"),
    ],
)
def test_config_mistakes_are_named_one_line_each(config: object, problem: str) -> None:
    problems = config_problems(config)
    assert any(problem in line for line in problems), problems
    assert all("\n" not in line for line in problems)


def test_reference_config_keys_are_accepted() -> None:
    config = {
        "test_data_file": "tasks.json",
        "trace_file_name": "network.har",
        "environments": {
            "__SHOPPING_ADMIN__": {
                "urls": ["http://127.0.0.1:7780/admin", "https://admin.example.com"],
                "active_url_idx": 1,
                "use_header_login": True,
                "credentials": {"username": "admin", "password": "admin1234"},
                "extra": {"container_name": "shopping_admin"},
            }
        },
    }
    assert config_problems(config) == []


def test_a_config_file_with_several_mistakes_fails_with_one_line_each(tmp_path: Path) -> None:
    file = tmp_path / "config.json"
    file.write_text(json.dumps({"environments": {"__SHOPING__": {"url": ["127.0.0.1:1"]}}}))
    with pytest.raises(SiteConfigError) as caught:
        SiteMap.load(file)
    lines = str(caught.value).splitlines()
    assert len(lines) == 3 and all(line.startswith(f"{file}: environments.__SHOPING__") for line in lines)


def test_map_lists_each_site_and_its_urls(site_map: SiteMap) -> None:
    assert all(name.startswith("__") and urls for name, urls in site_map.urls.items())


URL_PARTS = st.sampled_from(
    ["http://a", "http://a:8080", "http://b", "https://a", "http://a:80", "http://ab"]
)
REPLICA_URL = st.tuples(URL_PARTS, st.sampled_from(["", "/", "/admin"]))
PATHS = st.sampled_from(["", "/", "/x", "/x/y", "?q=1", "#f", "/admin", "/admin/p", "/adminx"])


@given(
    bases=st.lists(st.lists(REPLICA_URL, min_size=1, max_size=2), min_size=1, max_size=3),
    urls=st.lists(st.tuples(URL_PARTS, PATHS), max_size=12),
)  # fmt: skip
def test_replicas_of_by_origin_answers_as_the_scan_does(bases, urls):
    """The origin table (every replica URL a bare origin) and the scan (some with a path) agree with
    the scan on any map and URL."""
    replicas = [{"urls": [origin + path for origin, path in replica]} for replica in bases]
    site_map = SiteMap.from_dict({"environments": {"__GITLAB__": {"replicas": replicas}, "shopping": {
        "urls": [origin + path for origin, path in bases[0]]}}})  # fmt: skip
    for origin, path in urls:
        url = origin + path
        assert site_map.replicas_of(url) == site_map._replicas_under(url), url
