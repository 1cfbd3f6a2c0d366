"""One site of the site map: its URLs, which of them agents start at, its replicas and its rules.

The reference's config keys (`urls`, `active_url_idx`, `use_header_login`, `credentials`) and this
project's own (`reset_url`, `replicas`, `reads`, `changes`); the site map (`sites.py`) holds one per
site, and reads the config file with `read_config_file`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from webarena_live.evaluator.errors import SiteConfigError
from webarena_live.evaluator.site_rules import SiteRule


def login_name(credentials: Mapping[str, str] | None) -> str:
    """Who a site's auto-login header signs in: `username`, or `email` (the storefront's customer)."""
    return (credentials or {}).get("username") or (credentials or {}).get("email") or ""


def login_value(credentials: Mapping[str, str] | None) -> str:
    """The auto-login header's value: `name:password`."""
    return f"{login_name(credentials)}:{(credentials or {}).get('password', '')}"


def read_config_file(path: str | Path) -> Any:
    """A config file's JSON content; SiteConfigError naming the file when it cannot be read or parsed."""
    file = Path(path)
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except OSError as error:
        raise SiteConfigError(f"{file}: cannot read site config: {error.strerror or error}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise SiteConfigError(f"{file}: site config is not valid JSON: {error}") from None


class SiteHealth(BaseModel):
    """This project's own key (`health`): when a replica of the site counts as failing. Of its last
    `window` judged answers, once it has at least `min_answers`, a share of `threshold` or more were
    failures (no connection, a timeout, 500, 502-504; `webarena_live.replicas.health`)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    window: int = Field(default=10, ge=1)
    threshold: float = Field(default=0.5, gt=0, le=1)
    min_answers: int = Field(default=2, ge=1)

    @model_validator(mode="after")
    def _fits_the_window(self) -> SiteHealth:
        # A window never holds more answers than its size: such a copy could never be called failing.
        if self.min_answers > self.window:
            raise PydanticCustomError(
                "site_config",
                "min_answers ({min_answers}) is more than window ({window}): it never holds that many",
                {"min_answers": self.min_answers, "window": self.window},
            )
        return self


class Replica(BaseModel):
    """One complete deployment of a site: its URLs (the first is where agents start), the endpoint
    that brings it back to its seeded state, and where to ask whether it is up."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    urls: tuple[str, ...]
    reset_url: str | None = None
    health_url: str | None = None
    """This project's own key: a path on the replica (`/-/readiness`) or a URL that answers 2xx while
    it is up; probed after a reset and while it is failing. None probes the start URL."""

    @property
    def url(self) -> str:
        return self.urls[0]

    @property
    def probe_url(self) -> str:
        """The URL a health probe asks: `health_url` against the start URL, or the start URL itself."""
        return urljoin(self.url, self.health_url) if self.health_url else self.url


class SiteEnvironment(BaseModel):
    """The URLs one site is reachable at, and which of them new requests go to."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    urls: tuple[str, ...] = ()
    active_url_idx: int | None = None
    use_header_login: bool = False
    """Log in with the site's auto-login header (`AUTO_LOGIN_HEADERS`), built from `credentials`."""
    credentials: dict[str, str] | None = None
    reset_url: str | None = None
    """This project's own key: a URL to POST to before a session that asks for a reset (e.g. the
    environment-control server's restart endpoint); the reference ignores it."""
    replicas: tuple[Replica, ...] = ()
    """This project's own key: the site's deployments. Given in a config, `urls` is every replica's
    URLs; a config with plain `urls` (and `reset_url`) is one replica."""
    reads: tuple[SiteRule, ...] = ()
    """This project's own key: requests that only read the site (`site_rules`; the replica pool's)."""
    changes: tuple[SiteRule, ...] = ()
    """This project's own key: requests that change the site whatever else says (`site_rules`)."""
    health: SiteHealth = SiteHealth()
    """This project's own key: when a replica of the site counts as failing (`SiteHealth`)."""
    health_url: str | None = None
    """This project's own key, for a site of plain `urls`: its one replica's `health_url`."""

    @model_validator(mode="before")
    @classmethod
    def _replica_urls(cls, data: Any) -> Any:
        # With `replicas`, the site's URLs are all of theirs: any derenders, the reference reads them all.
        if isinstance(data, dict) and data.get("replicas") and not data.get("urls"):
            urls = [url for replica in data["replicas"] if isinstance(replica, dict)
                    for url in replica.get("urls") or ()]  # fmt: skip
            return {**data, "urls": urls}
        return data

    @model_validator(mode="after")
    def _default_active(self) -> SiteEnvironment:
        # Like the reference: no index given means the first URL.
        if self.active_url_idx is None and self.urls:
            object.__setattr__(self, "active_url_idx", 0)
        if not self.replicas and self.urls:
            one = Replica(urls=self.urls, reset_url=self.reset_url, health_url=self.health_url)
            object.__setattr__(self, "replicas", (one,))
        return self

    @property
    def active_url(self) -> str | None:
        idx = self.active_url_idx
        if not self.urls or idx is None or not 0 <= idx < len(self.urls):
            return None
        return self.urls[idx]
