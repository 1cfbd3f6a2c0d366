"""Checking a site config and site names before anything runs: one clear line per mistake.

A mistyped key (`"url"` for `"urls"`), a site WebArena does not know
(`__SHOPING__`) or a base URL without scheme would otherwise be accepted and
cost a whole run. The strict pydantic model of a config file (`ConfigFile`:
no unknown key, known site names, http(s) base URLs) finds them; each of its
errors becomes one line, with a did-you-mean. Also the two spellings of a site
(`shopping_admin`, `__SHOPPING_ADMIN__`).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from webarena_live.evaluator.site_environment import SiteHealth
from webarena_live.evaluator.site_rules import RULE_KEYS, ConfigChangeRule, ConfigRule

KNOWN_SITES = ("gitlab", "homepage", "map", "reddit", "shopping", "shopping_admin", "wikipedia")
"""The sites WebArena-Verified knows; the reference refuses any other name in a task or a config."""


def site_key(name: str) -> str:
    """`__SHOPPING_ADMIN__`, `shopping_admin` and `SHOPPING_ADMIN` all name the same site."""
    return name.strip().strip("_").lower()


def placeholder(site: str) -> str:
    """The token task URLs use for `site`: `shopping_admin` -> `__SHOPPING_ADMIN__`."""
    return f"__{site.upper()}__"


AUTO_LOGIN_HEADERS = {
    "shopping_admin": "X-M2-Admin-Auto-Login",
    "shopping": "X-M2-Customer-Auto-Login",
    "reddit": "X-Postmill-Auto-Login",
}
"""Sites the official images log in by a request header (`use_header_login`), and the header: the
admin's, the storefront customer's (`email:password`) and the forum's (`username:password`)."""


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


def _raise_problem(check: Callable[[str], str | None]) -> Callable[[str], str]:
    def validate(value: str) -> str:
        problem = check(value)
        if problem:
            raise PydanticCustomError("site_config", problem)
        return value

    return validate


def health_url_problem(url: object) -> str | None:
    """Why `url` cannot be a replica's `health_url` (a path such as `/-/readiness`, or an http(s) URL)."""
    if (isinstance(url, str) and url.startswith("/")) or url_problem(url) is None:
        return None
    return f"{url!r} is neither a path (such as '/-/readiness') nor an http(s) URL with a host"


SiteName = Annotated[str, AfterValidator(_raise_problem(unknown_site_problem))]
BaseUrl = Annotated[str, AfterValidator(_raise_problem(url_problem))]
HealthUrl = Annotated[str, AfterValidator(_raise_problem(health_url_problem))]


class ConfigHealth(SiteHealth):
    """A site's `health` as its author wrote it: `SiteHealth`, with no unknown key."""

    model_config = ConfigDict(frozen=True, extra="forbid")


HEALTH_HINTS = {
    "window": "a whole number of answers, at least 1 (default 10)",
    "threshold": "the share of failures that makes a replica failing, above 0 and at most 1 (default 0.5)",
    "min_answers": "a whole number of answers, at least 1 (default 2)",
}
"""What each key of `health` takes, for the line that names a mistyped value."""


class ConfigReplica(BaseModel):
    """One deployment of a site: its URLs, its reset endpoint and its health probe (this project's)."""

    model_config = ConfigDict(extra="forbid")

    urls: Annotated[list[BaseUrl], Field(min_length=1)]
    reset_url: BaseUrl | None = None
    health_url: HealthUrl | None = None


class ConfigEnvironment(BaseModel):
    """One site's entry of a config file as its author wrote it: the reference's keys, and this
    project's `reset_url` and `replicas` (several deployments of the site, instead of `urls`)."""

    model_config = ConfigDict(extra="forbid")

    urls: Annotated[list[BaseUrl], Field(min_length=1)] | None = None
    active_url_idx: Any = None
    container: Any = None
    credentials: Any = None
    extra: Any = None
    reset_url: BaseUrl | None = None
    use_header_login: Any = False
    replicas: Annotated[list[ConfigReplica], Field(min_length=1)] | None = None
    reads: list[ConfigRule] | None = None
    """This project's own: requests that only read the site (`site_rules`)."""
    changes: list[ConfigChangeRule] | None = None
    """This project's own: requests that change the site, whatever else says they read (`site_rules`)."""
    health: ConfigHealth | None = None
    """This project's own: when a replica of the site counts as failing (`SiteHealth`)."""
    health_url: HealthUrl | None = None
    """This project's own, with plain `urls`: where to ask whether the site is up."""

    @model_validator(mode="after")
    def _urls_or_replicas(self) -> ConfigEnvironment:
        plain = (self.urls, self.reset_url, self.health_url)
        if self.replicas is not None and any(value is not None for value in plain):
            raise PydanticCustomError(
                "site_config",
                'give either "urls" (and "reset_url", "health_url") or "replicas", each with its own',
            )
        if self.replicas is None and self.urls is None:
            raise PydanticCustomError("site_config", '"urls" must be a non-empty list of base URLs')
        return self

    def deployments(self) -> list[list[str]]:
        """Each replica's URLs (one replica for plain `urls`)."""
        if self.replicas is not None:
            return [replica.urls for replica in self.replicas]
        return [self.urls or []]


class ConfigFile(BaseModel):
    """A config file in the reference's format, checked strictly: every key, site and URL.

    `SiteMap` reads the same document leniently (a tool's `run_config.json`); a file a person wrote
    is validated by this model first, and each of its errors becomes one line (`config_problems`).
    """

    model_config = ConfigDict(extra="forbid")

    environments: dict[SiteName, ConfigEnvironment]
    agent_response_file_name: Any = None
    eval_result_file_name: Any = None
    storage_state_file_name: Any = None
    test_data_file: Any = None
    trace_file_name: Any = None

    @model_validator(mode="after")
    def _one_place_per_url(self) -> ConfigFile:
        # With replicas, a URL in two sites or two replicas would make a request's replica (and so its
        # lease) ambiguous. Plain configs may still map one server to several sites, as the reference's do.
        if all(env.replicas is None for env in self.environments.values()):
            return self
        seen: dict[str, str] = {}
        twice = []
        for name, env in self.environments.items():
            for index, urls in enumerate(env.deployments()):
                where = f"environments.{name}" + (f".replicas[{index}]" if env.replicas is not None else "")
                for url in urls:
                    key = url.rstrip("/").lower()
                    if key in seen and seen[key] != where:
                        twice.append(f"{where}: {url!r} is also a URL of {seen[key]}")
                    seen.setdefault(key, where)
        if twice:
            raise PydanticCustomError("site_config", "\n".join(twice))
        return self

    @model_validator(mode="after")
    def _header_login(self) -> ConfigFile:
        sites = ", ".join(placeholder(s) for s in AUTO_LOGIN_HEADERS)
        wrong = [
            f"environments.{name}: use_header_login: only {sites} has an auto-login header"
            for name, env in self.environments.items()
            if env.use_header_login and site_key(name) not in AUTO_LOGIN_HEADERS
        ]
        if wrong:
            raise PydanticCustomError("site_config", "\n".join(wrong))
        return self


CONFIG_KEYS = tuple(ConfigFile.model_fields)
ENVIRONMENT_KEYS = tuple(ConfigEnvironment.model_fields)
REPLICA_KEYS = tuple(ConfigReplica.model_fields)
HEALTH_KEYS = tuple(ConfigHealth.model_fields)
_EXAMPLE = '{"environments": {"__SHOPPING__": {"urls": ["http://127.0.0.1:7770"]}}}'


def config_problems(data: object) -> list[str]:
    """Every mistake in a site config in the reference's format, one line each; empty when usable."""
    if not isinstance(data, dict):
        return [f"the config must be a JSON object, got {type(data).__name__}"]
    try:
        ConfigFile.model_validate(data)
    except ValidationError as error:
        lines = [line for item in error.errors() for line in _lines(item, data).splitlines()]
        return lines + [line for line in _without_urls(data) if line not in lines]
    return []


def _without_urls(data: dict[str, Any]) -> list[str]:
    """Sites with neither `urls` nor `replicas`: told even when another mistake in the same entry kept
    the model from checking it."""
    environments = data.get("environments")
    if not isinstance(environments, dict):
        return []
    return [
        f'environments.{name}: "urls" must be a non-empty list of base URLs'
        for name, env in environments.items()
        if isinstance(env, dict) and "urls" not in env and "replicas" not in env
    ]


def _lines(error: Any, data: dict[str, Any]) -> str:
    """A validation error of `ConfigFile` as the line(s) a person reads."""
    loc, kind, value = error["loc"], error["type"], error.get("input")
    if kind == "site_config":
        where = ".".join(map(str, loc[:2]))
        rest = [f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc[2:] if part != "[key]"]
        where += "".join(rest)
        return f"{where}: {error['msg']}" if where else error["msg"]
    if loc == ("environments",):
        got = "none" if kind == "missing" else type(value).__name__
        return f'"environments" must be an object of sites ({got} given), e.g. {_EXAMPLE}'
    if kind == "extra_forbidden":
        in_replica = len(loc) > 3 and loc[2] == "replicas"
        in_rule = len(loc) > 3 and loc[2] in ("reads", "changes")
        in_health = len(loc) == 4 and loc[2] == "health"
        keys = (
            CONFIG_KEYS if len(loc) == 1
            else REPLICA_KEYS if in_replica
            else RULE_KEYS if in_rule
            else HEALTH_KEYS if in_health
            else ENVIRONMENT_KEYS
        )  # fmt: skip
        where = (
            "" if len(loc) == 1
            else f"environments.{loc[1]}" + (
                f".{loc[2]}[{loc[3]}]" if in_replica or in_rule else ".health" if in_health else ""
            )
        )  # fmt: skip
        return f"{where}{': ' if where else ''}unknown key {loc[-1]!r}{_did_you_mean(str(loc[-1]), keys)}"
    where = f"environments.{loc[1]}"
    if len(loc) == 2:
        return f'{where}: must be an object such as {{"urls": ["http://..."]}}'
    if loc[2] == "replicas" and len(loc) >= 4 and isinstance(loc[3], int):
        where, loc = f"{where}.replicas[{loc[3]}]", (*loc[:2], *loc[4:])
        if len(loc) == 2:
            return f'{where}: must be an object such as {{"urls": ["http://..."], "reset_url": "http://..."}}'
    if loc[2] in ("reads", "changes"):
        return _rule_line(where, loc[2:], error["msg"])
    if loc[2] == "health":
        return _health_line(where, loc[3:], value)
    if loc[2] in ("urls", "replicas") and len(loc) == 3:
        what = "base URLs" if loc[2] == "urls" else 'replicas, each {"urls": [...], "reset_url": ...}'
        return f'{where}: "{loc[2]}" must be a non-empty list of {what}'
    field = f"urls[{loc[3]}]" if loc[2] == "urls" and len(loc) > 3 else loc[2]
    return f"{where}.{field}: {url_problem(value) or error['msg']}"


def _health_line(where: str, loc: tuple[Any, ...], value: object) -> str:
    """A mistake in a site's `health` as one line naming the key and what it takes."""
    if not loc or loc[0] not in HEALTH_HINTS:
        example = '{"window": 10, "threshold": 0.5, "min_answers": 2}'
        return f"{where}.health: must be an object such as {example}"
    return f"{where}.health.{loc[0]}: must be {HEALTH_HINTS[loc[0]]}, not {value!r}"


def _rule_line(where: str, loc: tuple[Any, ...], message: str) -> str:
    """A mistake in a `reads` or `changes` rule (`site_rules`) as one line naming the rule and key."""
    example = '[{"method": "POST", "path": "^/search$"}]'
    if len(loc) == 1:
        return f"{where}.{loc[0]}: must be a list of rules such as {example}"
    rule = f"{where}.{loc[0]}[{loc[1]}]"
    if len(loc) == 2:
        return f"{rule}: must be an object such as {example[1:-1]}"
    return f"{rule}.{loc[2]}: {message}"
