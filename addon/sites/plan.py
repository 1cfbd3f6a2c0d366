"""Container copies planned from the site map, before any engine is asked: each copy's name, engine,
host ports, URL and settings, a pure function of the entry (docs/reference/site-map.md, Copies as
containers). So every process that reads the map (a fleet's workers, `evaluate`, a restarted `serve`)
derives the same URLs, and only the copies' owner talks to an engine (`copies.py`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import ValidationError

from webarena_live.evaluator import SiteConfigError, SiteMap, placeholder, read_config_file, site_key
from webarena_live.sites.official import ENV_CTRL_PORT_ENV, EXTERNAL_URL_ENV
from webarena_live.sites.spec import SITE_KEYS, ContainerSite, container_site, is_container_entry

LABEL = "webarena-live"
"""Every copy's labels start with it: `webarena-live.site`, `.copy`, `.spec`, `.name`."""


@dataclass(frozen=True)
class CopyPlan:
    """One copy: what its container is created with, and where it answers."""

    site: str
    index: int
    name: str
    engine: str
    image: str
    url: str
    """The site's URL on this copy (the replica's URL in the site map)."""
    origin: str
    ports: tuple[tuple[int, int], ...]
    """(container port, host port) pairs."""
    env: tuple[tuple[str, str], ...]
    volumes: tuple[tuple[str, str, str], ...]
    """(source: a volume name or a host folder, target, mode: `own`, `shared`, `shared-ro`)."""
    ulimits: tuple[tuple[str, int], ...]
    env_ctrl_url: str | None
    health_url: str
    ready_timeout: float
    prefix: str
    bind: str = ""
    """The host address its ports are published on: 127.0.0.1 when it is reached on loopback, else every
    address of the engine's host ("")."""

    @property
    def spec_hash(self) -> str:
        """What the container is made of, hashed: an adopted container with another hash was made from
        another plan, and is made again."""
        made_of = [self.image, self.ports, self.env, self.volumes, self.ulimits]
        return hashlib.sha256(json.dumps(made_of).encode()).hexdigest()[:16]

    @property
    def labels(self) -> dict[str, str]:
        return {
            f"{LABEL}.name": self.prefix,
            f"{LABEL}.site": self.site,
            f"{LABEL}.copy": str(self.index),
            f"{LABEL}.spec": self.spec_hash,
        }

    @property
    def own_volumes(self) -> list[str]:
        return [source for source, _, mode in self.volumes if mode == "own"]

    @property
    def keeps_changes(self) -> bool:
        """Whether a change can outlive a recreation: a volume every copy mounts writable."""
        return any(mode == "shared" for _, _, mode in self.volumes)

    def label(self) -> str:
        return f"copy {self.index} of {placeholder(self.site)} ({self.name} on {self.engine})"


@dataclass(frozen=True)
class SiteCopies:
    site: str
    spec: ContainerSite
    copies: tuple[CopyPlan, ...]

    def replicas_entry(self) -> list[dict[str, Any]]:
        return [{"urls": [copy.url]} for copy in self.copies]


@dataclass(frozen=True)
class SitesPlan:
    """The container copies of every site of the map that names an image, by site name."""

    sites: Mapping[str, SiteCopies]

    @property
    def copies(self) -> list[CopyPlan]:
        return [copy for site in self.sites.values() for copy in site.copies]

    def copy_of(self, site: str, index: int) -> CopyPlan | None:
        found = self.sites.get(site)
        return found.copies[index] if found is not None and 0 <= index < len(found.copies) else None

    @property
    def ceilings(self) -> dict[str, int]:
        """Per site, how many copies may be held at once: the rest are spares."""
        return {site: found.spec.replicas for site, found in self.sites.items()}

    @property
    def keep(self) -> bool:
        return any(found.spec.keep for found in self.sites.values())


def engine_host(url: str) -> str:
    """Where an engine's published ports are reached: its URL's host, 127.0.0.1 for a local socket."""
    parts = urlsplit(url)
    if parts.scheme in ("unix", "npipe") or not parts.hostname:
        return "127.0.0.1"
    return parts.hostname


def plan_site(site: str, spec: ContainerSite) -> SiteCopies:
    copies = []
    for index in range(spec.copies):
        engine = spec.engines[index % len(spec.engines)]
        host = spec.host or engine_host(engine)
        site_port = spec.host_port + index * spec.port_stride
        origin = f"http://{host}:{site_port}"
        ports = [(spec.port, site_port)]
        env_ctrl_url = None
        if spec.env_ctrl_port is not None and spec.env_ctrl_host_port is not None:
            ctrl_port = spec.env_ctrl_host_port + index * spec.port_stride
            ports.append((spec.env_ctrl_port, ctrl_port))
            env_ctrl_url = f"http://{host}:{ctrl_port}"
        name = f"{spec.name}-{site}-{index}"
        env = {EXTERNAL_URL_ENV: origin, **spec.env}
        if spec.env_ctrl_port is not None:
            env.setdefault(ENV_CTRL_PORT_ENV, str(spec.env_ctrl_port))
        volumes = tuple(
            (
                f"{name}-{volume.target.strip('/').replace('/', '-')}" if volume.mode == "own"
                else volume.name or str(volume.source), volume.target, volume.mode,
            )
            for volume in spec.volumes
        )  # fmt: skip
        copies.append(
            CopyPlan(
                site=site, index=index, name=name, engine=engine, image=spec.image,
                url=origin + spec.path, origin=origin, ports=tuple(ports), env=tuple(sorted(env.items())),
                volumes=volumes, ulimits=tuple(sorted(spec.ulimits.items())), env_ctrl_url=env_ctrl_url,
                health_url=origin + spec.health_path, ready_timeout=spec.ready_timeout, prefix=spec.name,
                bind=host if host in ("127.0.0.1", "localhost", "::1") else "",
            )
        )  # fmt: skip
    return SiteCopies(site, spec, tuple(copies))


def port_problems(plan: SitesPlan) -> list[str]:
    """Two copies given the same host port on the same host: one line each."""
    seen: dict[tuple[str, int], str] = {}
    problems = []
    for copy in plan.copies:
        host = urlsplit(copy.origin).hostname or ""
        for _, port in copy.ports:
            other = seen.setdefault((host, port), copy.label())
            if other != copy.label():
                problems.append(
                    f"{placeholder(copy.site)}: {copy.label()} and {other} would both publish port {port} on "
                    f"{host}; give the site another host_port (or port_stride)"
                )
    return problems


def split_config(data: Any, *, source: str) -> tuple[Any, SitesPlan | None]:
    """A site map's parsed content with each container entry replaced by its copies as replicas (what
    `SiteMap` reads), and the plan of those copies (None when no entry names an image). Every mistake
    in a container entry is one line of the `SiteConfigError`."""
    environments = data.get("environments") if isinstance(data, dict) else None
    if not isinstance(environments, dict) or not any(map(is_container_entry, environments.values())):
        return data, None
    problems, sites, plain = [], {}, dict(environments)
    for name, entry in environments.items():
        if not is_container_entry(entry):
            continue
        where = f"{source}: environments.{name}"
        key = site_key(name) if isinstance(name, str) else None
        if not key:
            continue  # the site map's own check names it
        try:
            spec = container_site(key, entry)
        except ValidationError as error:
            problems += [
                f"{where}.{'.'.join(str(p) for p in item['loc']) or '(entry)'}: {item['msg']}"
                for item in error.errors()
            ]
            continue
        except ValueError as error:
            problems.append(f"{where}: {error}")
            continue
        sites[key] = plan_site(key, spec)
        kept = {k: v for k, v in entry.items() if k in SITE_KEYS}
        plain[name] = {**kept, "replicas": sites[key].replicas_entry()}
    plan = SitesPlan(sites)
    problems += [f"{source}: {line}" for line in port_problems(plan)]
    if problems:
        raise SiteConfigError("\n".join(problems))
    return {**data, "environments": plain}, plan


def load_site_map(path: str | Path, *, strict: bool = True) -> tuple[SiteMap, SitesPlan | None]:
    """A site map file read as `SiteMap.load` reads it, with its container entries planned: the map of
    the copies' URLs, and their plan (None when no entry names an image)."""
    data, plan = split_config(read_config_file(path), source=str(path))
    return SiteMap.from_config(data, source=str(path), strict=strict), plan
