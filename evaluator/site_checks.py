"""Checking a site config and site names before anything runs: one clear line per mistake.

A mistyped key (`"url"` for `"urls"`), a site WebArena does not know
(`__SHOPING__`) or a base URL without scheme would otherwise be accepted and
cost a whole run; these functions name each problem, with a did-you-mean.
Also the two spellings of a site (`shopping_admin`, `__SHOPPING_ADMIN__`).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

KNOWN_SITES = ("gitlab", "homepage", "map", "reddit", "shopping", "shopping_admin", "wikipedia")
"""The sites WebArena-Verified knows; the reference refuses any other name in a task or a config."""

CONFIG_KEYS = (
    "agent_response_file_name",
    "environments",
    "eval_result_file_name",
    "storage_state_file_name",
    "test_data_file",
    "trace_file_name",
)
"""Top-level keys of the reference's config file."""

ENVIRONMENT_KEYS = (
    "active_url_idx",
    "container",
    "credentials",
    "extra",
    "reset_url",
    "urls",
    "use_header_login",
)
"""Keys of one site's entry in the reference's config file."""


def _did_you_mean(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def unknown_site_problem(name: str) -> str | None:
    """Why `name` (`shoping`, `__SHOPING__`) names no WebArena site, or None when it does."""
    key = site_key(name)
    if key in KNOWN_SITES:
        return None
    close = difflib.get_close_matches(key, KNOWN_SITES, n=1, cutoff=0.6)
    # Suggested as the name was written: a placeholder for a placeholder.
    hint = (
        f" (did you mean {placeholder(close[0]) if name.startswith('_') else close[0]!r}?)" if close else ""
    )
    return f"{name!r} is not a WebArena site{hint}; the sites are {', '.join(map(placeholder, KNOWN_SITES))}"


def url_problem(url: object) -> str | None:
    """Why `url` cannot be a site's base URL (no scheme, no host), or None."""
    if not isinstance(url, str) or not url.strip():
        return f"{url!r} is not a URL"
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        hint = f" (write http://{url})" if "://" not in url else ""
        return f"{url!r} is not an http(s) URL with a host{hint}"
    return None


def config_problems(data: object) -> list[str]:
    """Every mistake in a site config in the reference's format, one line each; empty when usable."""
    if not isinstance(data, dict):
        return [f"the config must be a JSON object, got {type(data).__name__}"]
    problems = [
        f"unknown key {key!r}{_did_you_mean(key, CONFIG_KEYS)}" for key in data if key not in CONFIG_KEYS
    ]
    environments = data.get("environments")
    if not isinstance(environments, dict):
        example = '{"environments": {"__SHOPPING__": {"urls": ["http://127.0.0.1:7770"]}}}'
        got = "none" if environments is None else type(environments).__name__
        return [*problems, f'"environments" must be an object of sites ({got} given), e.g. {example}']
    for name, env in environments.items():
        where = f"environments.{name}"
        site = unknown_site_problem(name)
        if site:
            problems.append(f"{where}: {site}")
        if not isinstance(env, dict):
            problems.append(f'{where}: must be an object such as {{"urls": ["http://..."]}}')
            continue
        problems += [
            f"{where}: unknown key {key!r}{_did_you_mean(key, ENVIRONMENT_KEYS)}"
            for key in env
            if key not in ENVIRONMENT_KEYS
        ]
        problems += _login_and_reset_problems(where, site_key(str(name)), env)
        urls = env.get("urls")
        if not isinstance(urls, list) or not urls:
            problems.append(f'{where}: "urls" must be a non-empty list of base URLs')
            continue
        problems += [f"{where}.urls[{i}]: {p}" for i, url in enumerate(urls) if (p := url_problem(url))]
    return problems


def _login_and_reset_problems(where: str, site: str, env: dict[str, Any]) -> list[str]:
    problems = []
    if env.get("use_header_login") and site not in AUTO_LOGIN_HEADERS:
        sites = ", ".join(placeholder(s) for s in AUTO_LOGIN_HEADERS)
        problems.append(f"{where}: use_header_login: only {sites} has an auto-login header")
    if "reset_url" in env and (problem := url_problem(env["reset_url"])):
        problems.append(f"{where}.reset_url: {problem}")
    return problems


def site_key(name: str) -> str:
    """`__SHOPPING_ADMIN__`, `shopping_admin` and `SHOPPING_ADMIN` all name the same site."""
    return name.strip().strip("_").lower()


def placeholder(site: str) -> str:
    """The token task URLs use for `site`: `shopping_admin` -> `__SHOPPING_ADMIN__`."""
    return f"__{site.upper()}__"


AUTO_LOGIN_HEADERS = {"shopping_admin": "X-M2-Admin-Auto-Login"}
"""Sites the official harness logs into with a request header (`use_header_login`), and the header."""
