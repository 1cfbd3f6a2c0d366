"""A site map entry that names an image instead of URLs: its copies made through a container engine
(docs/reference/site-map.md, Copies as containers). Read by `plan.py` into each copy's name, ports and URL.

    {"__SHOPPING__": {"image": "am1n3e/webarena-verified-shopping", "replicas": 4, "spares": 1,
                      "engines": ["unix:///run/podman/podman.sock"]}}

An entry is a container entry when it has `image`, or `replicas` as a number (an official site's image
is then the reference's). Every other key of the site map (`use_header_login`, `credentials`, `reads`,
`changes`, `health`) means what it means for a site of URLs.
"""

from __future__ import annotations

import os
import resource
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from webarena_live.sites.official import OFFICIAL_SITES, VolumeMode

WANTED_ULIMITS: dict[str, int] = {"nofile": 65536, "nproc": 16384}
"""Each copy's `nofile` and `nproc` limits (soft = hard), as a site's servers (MySQL, Elasticsearch,
PHP-FPM) want them. Podman's Docker-compatible service under runc starts a container only with explicit
limits on some hosts, and never above its own hard limits ("error setting rlimits ... operation not
permitted"); the Docker Engine sets its own. Given explicitly, they are the same on both engines."""


def default_ulimits() -> dict[str, int]:
    """`WANTED_ULIMITS`, each capped at this process's own hard limit (an engine on this machine runs
    under the same ones); a site map entry's `ulimits` replaces them."""
    limits = {}
    for name, wanted in WANTED_ULIMITS.items():
        hard = resource.getrlimit(getattr(resource, f"RLIMIT_{name.upper()}"))[1]
        limits[name] = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    return limits


PODMAN_SOCKETS = ("/run/podman/podman.sock", "/var/run/docker.sock", "/run/docker.sock")


def default_engine() -> str:
    """The engine a map that names none uses: `DOCKER_HOST` when set, else the first of Podman's root
    socket and Docker's that exists, else Podman's (its absence told when the engine is asked)."""
    if host := os.environ.get("DOCKER_HOST"):
        return host
    for path in PODMAN_SOCKETS:
        if Path(path).exists():
            return f"unix://{path}"
    return f"unix://{PODMAN_SOCKETS[0]}"


class VolumeSpec(BaseModel):
    """A volume each copy mounts: a named volume (`name`), a folder of the engine's host (`source`), or,
    for an `own` volume, none (one named after the copy, made and removed with it)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    target: str
    name: str | None = None
    source: str | None = None
    mode: VolumeMode = "own"

    @model_validator(mode="after")
    def _one_source(self) -> VolumeSpec:
        if not self.target.startswith("/"):
            raise ValueError(f"target {self.target!r} must be an absolute path in the container")
        if self.name and self.source:
            raise ValueError("give a volume's name or its source folder, not both")
        if self.mode == "own" and (self.name or self.source):
            raise ValueError('an "own" volume is made with its copy: give neither name nor source')
        if self.mode != "own" and not (self.name or self.source):
            raise ValueError(f'a "{self.mode}" volume needs the name of a volume or a source folder')
        return self


class ContainerSite(BaseModel):
    """One site's copies, as the site map entry asks for them; what it leaves out is the official
    site's default (`official.py`), or none for a site of the user's own."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    image: str
    replicas: int = Field(default=1, ge=1)
    """Copies that serve sessions at once."""
    spares: int = Field(default=0, ge=0)
    """Fresh copies kept ready beside them: a changed copy is retired and a spare takes its place."""
    port: int = Field(ge=1, le=65535)
    """The site's port inside the container."""
    env_ctrl_port: int | None = Field(default=None, ge=1, le=65535)
    """env-ctrl's port inside the container (readiness: its `/status`); None: the image has none."""
    host_port: int = Field(ge=1, le=65535)
    """The first copy's site port on the engine's host; copy i's is `host_port + i * port_stride`."""
    env_ctrl_host_port: int | None = Field(default=None, ge=1, le=65535)
    port_stride: int = Field(default=100, ge=1)
    health_path: str = "/"
    """Asked until it answers below 500 before a copy is leased (after env-ctrl's `/status`)."""
    path: str = ""
    """What the site's URL adds to the copy's origin (`/admin` for the shop's admin)."""
    engines: tuple[str, ...] = Field(default_factory=lambda: (default_engine(),), min_length=1)
    """Engine URLs (`unix://`, `tcp://`, `ssh://`): copy i runs on `engines[i % len(engines)]`."""
    host: str | None = None
    """The host the copies' published ports are reached at (their URLs); None: the engine URL's host
    (127.0.0.1 for a local socket)."""
    env: dict[str, str] = Field(default_factory=dict)
    volumes: tuple[VolumeSpec, ...] = ()
    data_dir: str | None = None
    """A folder of the engine's host mounted read-only where the official image reads its data
    (Wikipedia's ZIM file)."""
    ulimits: dict[str, int] = Field(default_factory=default_ulimits)
    ready_timeout: float = Field(default=900.0, gt=0)
    """Seconds a new copy may take to be ready before it counts as failed (and is tried again)."""
    name: str = Field(default="webarena-live", pattern=r"^[a-zA-Z0-9][a-zA-Z0-9_.-]*$")
    """The copies' names start with it: `<name>-<site>-<i>`."""
    keep: bool = False
    """Leave the copies running when `serve` stops (the next `serve` adopts them)."""

    @field_validator("engines")
    @classmethod
    def _engine_urls(cls, engines: tuple[str, ...]) -> tuple[str, ...]:
        for url in engines:
            if not url.startswith(("unix://", "tcp://", "ssh://", "http://", "https://", "npipe://")):
                raise ValueError(f"engine {url!r} must be a unix://, tcp:// or ssh:// URL")
        return engines

    @property
    def copies(self) -> int:
        return self.replicas + self.spares


SITE_KEYS = ("use_header_login", "credentials", "reads", "changes", "health")
"""The site map's own keys a container entry keeps for the site (everything else is the containers')."""


def is_container_entry(entry: object) -> bool:
    return isinstance(entry, dict) and (
        "image" in entry
        or (isinstance(entry.get("replicas"), int) and not isinstance(entry["replicas"], bool))
    )


def container_site(site: str, entry: dict[str, Any]) -> ContainerSite:
    """The entry of `site` (`shopping`) with the official defaults filled in. ValueError or pydantic's
    ValidationError on a mistake."""
    own = {key: value for key, value in entry.items() if key not in SITE_KEYS}
    if "reset_url" in own or "urls" in own:
        raise ValueError(
            'a site of container copies has no "urls" or "reset_url": its copies\' URLs come from their '
            "ports, and a reset makes a new copy from the image"
        )
    official = OFFICIAL_SITES.get(site)
    defaults: dict[str, Any] = {}
    if official is not None:
        defaults = {
            "image": official.image,
            "port": official.port,
            "env_ctrl_port": official.env_ctrl_port,
            "host_port": official.host_port,
            "env_ctrl_host_port": official.env_ctrl_host_port,
            "health_path": official.health_path,
            "path": "/admin" if site == "shopping_admin" else "",
            "volumes": [{"target": v.target, "name": v.name, "mode": v.mode} for v in official.volumes],
        }
    if "host_port" in own and "env_ctrl_host_port" not in own:
        defaults.pop("env_ctrl_host_port", None)  # beside the site's own port, as the reference's are
    merged = {**defaults, **own}
    if official is not None and official.data_dir is not None and merged.get("data_dir"):
        extra = {"target": official.data_dir, "source": merged["data_dir"], "mode": "shared-ro"}
        merged["volumes"] = [*merged.get("volumes", ()), extra]
        merged["data_dir"] = None
    if merged.get("env_ctrl_port") is not None and merged.get("env_ctrl_host_port") is None:
        port = merged.get("host_port")
        merged["env_ctrl_host_port"] = port + 1 if isinstance(port, int) else None
    return ContainerSite.model_validate(merged)
