"""The site map: which real base URLs stand for each `__SITE__` placeholder.

Task files never name real hosts; they write `__GITLAB__/a/b`. A site map says
that `__GITLAB__` is, say, `http://localhost:8023`. A site may list several
URLs (staging, production, the proxy's view...): *rendering* a template uses
the active one, *derendering* a captured URL accepts any of them, so traces
recorded against any of a site's deployments are judged the same way.

The file format is the reference tooling's config:
`{"environments": {"__SHOPPING__": {"urls": [...], "active_url_idx": 0}, ...}}`.
Its other keys (credentials, container settings, file names) are accepted and
ignored. This project adds, per site, a `reset_url` and `replicas`: several
complete deployments of the site, each with its own URLs and reset endpoint
(`{"replicas": [{"urls": [...], "reset_url": "..."}, ...]}`). Every replica's
URLs count as the site's `urls` (so any of them derenders to the placeholder, and
the config written for the reference lists them all); a site with plain `urls`
is one replica. A config *file* is checked first (`site_checks.config_problems`): a
key the reference does not know, a site it does not know, or a URL without
scheme and host is a typo that would otherwise cost a whole run, so it is
refused with one line per problem.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

from webarena_live.evaluator.errors import SiteConfigError
from webarena_live.evaluator.site_checks import (
    AUTO_LOGIN_HEADERS,
    config_problems,
    placeholder,
    site_key,
)
from webarena_live.evaluator.site_environment import (
    Replica,
    SiteEnvironment,
    login_name,
    login_value,
    read_config_file,
)

if TYPE_CHECKING:
    from webarena_live.evaluator.trace import NetworkTrace

ADMIN_SITE = "shopping_admin"
"""The one site whose pages live under a path (`/admin`) rather than at a host root."""


def _origin(url: str) -> str:
    """`url` up to the end of its host and port: what `_under` compares when a base has no path."""
    start = url.find("://")
    start = start + 3 if start >= 0 else 0
    end = len(url)
    for mark in "/?#":
        found = url.find(mark, start, end)
        if found >= 0:
            end = found
    return url[:end]


def _under(url: str, base: str) -> bool:
    """Whether `url` is on the deployment at `base` (same origin, and below its path)."""
    base = base.rstrip("/")
    return (
        url == base or url.startswith(base + "/") or url.startswith(base + "?") or url.startswith(base + "#")
    )


class SiteMap(BaseModel):
    """Placeholders to base URLs, by site name (`shopping`, `gitlab`, ...)."""

    model_config = ConfigDict(frozen=True)

    environments: dict[str, SiteEnvironment] = Field(default_factory=dict)
    _key: tuple[tuple[str, tuple[str, ...], int | None], ...] | None = PrivateAttr(default=None)
    _checked: dict[tuple[str, ...], tuple[str, ...]] = PrivateAttr(default_factory=dict)
    _derender_tables: dict[tuple[str, ...], tuple[tuple[str, str, str], ...]] = PrivateAttr(
        default_factory=dict
    )
    _by_origin: dict[str, tuple[tuple[str, int], ...]] | None = PrivateAttr(default=None)

    @model_validator(mode="before")
    @classmethod
    def _site_names(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("environments"), dict):
            envs = {}
            for name, env in data["environments"].items():
                if not isinstance(name, str) or not site_key(name):
                    raise ValueError(f"site name {name!r} is not a placeholder such as __SHOPPING__")
                envs[site_key(name)] = env
            return {"environments": envs}
        if isinstance(data, dict) and data.get("environments") is None:
            return {"environments": {}}
        return data

    # ------------------------------------------------------------------ loading

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "<site map>") -> SiteMap:
        """Build from the reference config format; keys other than `environments` are ignored."""
        if not isinstance(data, Mapping):
            raise SiteConfigError(f"{source}: the config must be a JSON object, got {type(data).__name__}")
        try:
            return cls.model_validate({"environments": data.get("environments")})
        except ValidationError as error:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in item['loc']) or '(config)'}: {item['msg']}"
                for item in error.errors()
            )
            raise SiteConfigError(f"{source}: {problems}") from None

    @classmethod
    def load(cls, path: str | Path, *, strict: bool = True) -> SiteMap:
        """Read a config file in the reference format; every problem in it is one line of the error.

        `strict=False` skips the typo checks, for configs a tool wrote (a run's own `run_config.json`).
        """
        return cls.from_config(read_config_file(path), source=str(path), strict=strict)

    @classmethod
    def from_config(cls, data: Any, *, source: str, strict: bool = True) -> SiteMap:
        """From a config file's parsed content (`read_config_file`), checked as `load` checks it."""
        problems = config_problems(data) if strict else []
        if problems:
            raise SiteConfigError("\n".join(f"{source}: {problem}" for problem in problems))
        return cls.from_dict(data, source=source)

    @property
    def header_login_without_credentials(self) -> list[str]:
        """Sites asking for header login without credentials to build the header from (the reference's
        config accepts that; the proxy then adds no header, and says so at start)."""
        return [
            placeholder(name)
            for name, env in sorted(self.environments.items())
            if env.use_header_login and not login_name(env.credentials)
        ]

    @property
    def login_headers(self) -> tuple[tuple[str, str, str], ...]:
        """(origin, header, value) for each URL of each site that logs in by header (`use_header_login`)."""
        return tuple(
            (f"{parts.scheme}://{parts.netloc}".lower(), header, value)
            for name, (header, value) in self.login_headers_by_site.items()
            for parts in map(urlsplit, self.environments[name].urls)
        )

    @property
    def login_headers_by_site(self) -> dict[str, tuple[str, str]]:
        """site -> (header, value) for each site that logs in by header (`use_header_login`)."""
        return {
            name: (
                AUTO_LOGIN_HEADERS[name],
                login_value(env.credentials),
            )
            for name, env in sorted(self.environments.items())
            if env.use_header_login and name in AUTO_LOGIN_HEADERS and login_name(env.credentials)
        }

    @property
    def urls(self) -> dict[str, tuple[str, ...]]:
        """Each mapped site's placeholder and URLs, for banners and /health."""
        return {placeholder(name): env.urls for name, env in sorted(self.environments.items())}

    def replicas(self, site: str) -> tuple[Replica, ...]:
        """The deployments of `site` (one for a site with plain `urls`; none for an unmapped site)."""
        env = self.environments.get(site_key(site))
        return env.replicas if env is not None else ()

    @property
    def replicated(self) -> bool:
        """Whether some site has two or more replicas."""
        return any(len(env.replicas) > 1 for env in self.environments.values())

    def replicas_of(self, url: str) -> tuple[tuple[str, int], ...]:
        """(site, replica index) of the deployment `url` is on, by the longest matching replica URL (all
        of them when plain configs map one server to several sites); empty when it is on no site."""
        by_origin = self.replicas_by_origin()
        if by_origin:  # every replica URL is a bare origin: the answer is the URL's origin's
            return by_origin.get(_origin(url), ())
        return self._replicas_under(url)

    def replicas_by_origin(self) -> Mapping[str, tuple[tuple[str, int], ...]]:
        """`replicas_of` as a table by origin (`scheme://host[:port]`, as a URL of it starts) when every
        replica URL is a bare origin; empty when some replica URL has a path (then only `replicas_of`
        answers). The proxy reads it for every request, from the origin it already has."""
        # The private dict itself: pydantic finds a private attribute only after a failed lookup,
        # which costs more than the whole answer.
        private = self.__pydantic_private__
        by_origin = private.get("_by_origin") if private is not None else None
        return self._origin_table() if by_origin is None else by_origin

    def _origin_table(self) -> dict[str, tuple[tuple[str, int], ...]]:
        """`replicas_of` by origin when no replica URL has a path (the proxy asks it of every request),
        else empty: the scan below answers."""
        table: dict[str, tuple[int, list[tuple[str, int]]]] = {}
        for name, env in self.environments.items():
            for index, replica in enumerate(env.replicas):
                for base in replica.urls:
                    origin = base.rstrip("/")
                    if _origin(origin) != origin:
                        self._by_origin = {}
                        return self._by_origin
                    # as the scan picks: the longest URL as written (a trailing slash counts)
                    best, found = table.get(origin, (0, []))
                    if len(base) > best:
                        best, found = len(base), []
                    if len(base) == best:
                        table[origin] = (best, [*found, (name, index)])
        self._by_origin = {origin: tuple(found) for origin, (_, found) in table.items()}
        return self._by_origin

    def _replicas_under(self, url: str) -> tuple[tuple[str, int], ...]:
        best, found = 0, list[tuple[str, int]]()
        for name, env in self.environments.items():
            for index, replica in enumerate(env.replicas):
                for base in replica.urls:
                    if _under(url, base) and len(base) >= best:
                        if len(base) > best:
                            best, found = len(base), []
                        found.append((name, index))
        return tuple(found)

    def on_replicas(self, lease: Mapping[str, int]) -> SiteMap:
        """This map with each leased site's active URL on its leased replica (`site -> replica index`),
        for rendering a session's start URLs; every URL still derenders."""
        envs = dict(self.environments)
        for site, index in lease.items():
            env = envs.get(site_key(site))
            if env is not None and 0 <= index < len(env.replicas):
                active = env.urls.index(env.replicas[index].url)
                envs[site_key(site)] = env.model_copy(update={"active_url_idx": active})
        return SiteMap(environments=envs)

    @classmethod
    def from_urls(cls, urls: Mapping[str, str | Iterable[str]]) -> SiteMap:
        """Convenience: `{"shopping": "http://127.0.0.1:7770"}` (or a list of URLs per site)."""
        envs = {
            name: {"urls": [value] if isinstance(value, str) else list(value)} for name, value in urls.items()
        }
        return cls.from_dict({"environments": envs})

    def to_dict(self) -> dict[str, Any]:
        """The reference config format."""
        return {
            "environments": {
                placeholder(name): {"urls": list(env.urls), "active_url_idx": env.active_url_idx}
                for name, env in self.environments.items()
            }
        }

    # ------------------------------------------------------------------ queries

    @property
    def key(self) -> tuple[tuple[str, tuple[str, ...], int | None], ...]:
        """A hashable identity of the mapping, for caches of derived per-event values."""
        if self._key is None:
            self._key = tuple(
                (name, env.urls, env.active_url_idx) for name, env in sorted(self.environments.items())
            )
        return self._key

    def __eq__(self, other: object) -> bool:
        # Compare the mapping only, not the private lookup caches.
        return isinstance(other, SiteMap) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __contains__(self, site: object) -> bool:
        return isinstance(site, str) and site_key(site) in self.environments

    def active_url(self, site: str) -> str | None:
        env = self.environments.get(site_key(site))
        return env.active_url if env else None

    def _checked_sites(self, sites: Iterable[str] | None) -> tuple[str, ...]:
        # Called for every URL read; a task's `sites` tuple is checked once.
        known = self._checked.get(sites) if isinstance(sites, tuple) else None
        if known is not None:
            return known
        names = self._check(sites)
        if isinstance(sites, tuple):
            self._checked[sites] = names
        return names

    def _check(self, sites: Iterable[str] | None) -> tuple[str, ...]:
        if not self.environments:
            raise SiteConfigError("no site URLs configured (give a config with 'environments')")
        names = tuple(self.environments) if sites is None else tuple(site_key(s) for s in sites)
        missing = [placeholder(s) for s in names if s not in self.environments]
        if missing:
            raise SiteConfigError(f"the site config has no URLs for {', '.join(missing)}")
        return names

    def render(self, template: str, *, sites: Iterable[str] | None = None, strict: bool = True) -> str:
        """`__SITE__/path` -> `<active URL of site>/path`.

        Only a template that *starts* with a site's placeholder is rendered; the
        sites are tried in order. With `strict`, a template no site renders is
        an error; otherwise it comes back unchanged. Every site asked for must
        be configured (even when not strict), as in the reference.
        """
        for name in self._checked_sites(sites):
            token = placeholder(name)
            if not template.startswith(token):
                continue
            env = self.environments[name]
            url = env.active_url
            if url is None:
                raise SiteConfigError(
                    f"site {token} has no URL at index {env.active_url_idx} (urls: {list(env.urls)})"
                )
            rendered = template.replace(token, url)
            if rendered != template:
                return rendered
        if strict:
            raise SiteConfigError(
                f"no site in {[placeholder(s) for s in self._checked_sites(sites)]} "
                f"renders the URL template {template!r}"
            )
        return template

    def _derender_table(self, sites: tuple[str, ...]) -> tuple[tuple[str, str, str], ...]:
        """(url as configured, url without trailing slash, placeholder), most specific site first."""
        cache = self._derender_tables
        table = cache.get(sites)
        if table is None:
            # Longest URL first, so `http://h/admin` wins over `http://h` for an admin page.
            ordered = sorted(
                sites, key=lambda s: max((len(u) for u in self.environments[s].urls), default=0), reverse=True
            )
            table = tuple(
                (url, url.rstrip("/"), placeholder(name))
                for name in ordered
                for url in self.environments[name].urls
            )
            cache[sites] = table
        return table

    def derender(self, url: str, *, sites: Iterable[str] | None = None, strict: bool = False) -> str:
        """Any configured URL of a site -> its placeholder: `http://h:8023/a` -> `__GITLAB__/a`.

        The first configured URL found *anywhere* in `url` is replaced (so a URL
        embedded in a query string is derendered too), as in the reference.
        With `strict`, a URL that matches no site is an error.
        """
        names = self._checked_sites(sites)
        for configured, stripped, token in self._derender_table(names):
            if configured in url:
                return url.replace(stripped, token)
        if strict:
            raise SiteConfigError(
                f"URL {url!r} does not match any configured URL of {[placeholder(s) for s in names]}"
            )
        return url

    def covers(self, sites: Iterable[str]) -> bool:
        """True when every one of `sites` has at least one URL."""
        return all(site_key(s) in self.environments and self.environments[site_key(s)].urls for s in sites)

    def complete_from_trace(self, task_sites: Iterable[str], trace: NetworkTrace) -> SiteMap:
        """The reference's best-effort fallback when the config lacks a task's site.

        If every task site has URLs, the map is returned unchanged. Otherwise a
        new map is guessed from the trace, holding only the task's sites: the
        n-th site gets the scheme and host of the n-th evaluation event (the
        last one when there are fewer events), `/admin` appended for the shop
        admin. Without evaluation events nothing can be guessed: SiteConfigError.
        """
        sites = tuple(site_key(s) for s in task_sites)
        if self.covers(sites):
            return self
        events = trace.first_evaluation_events(len(sites))
        if not events:
            raise SiteConfigError(
                f"the site config has no URLs for {[placeholder(s) for s in sites]} and the trace has no "
                "events to guess them from"
            )
        guessed: dict[str, dict[str, list[str]]] = {}
        for index, name in enumerate(sites):
            parts = urlsplit(events[min(index, len(events) - 1)].url)
            base = f"{parts.scheme}://{parts.netloc}"
            guessed[name] = {"urls": [f"{base}/admin" if name == ADMIN_SITE else base]}
        return SiteMap.from_dict({"environments": guessed})
