"""How a replica is made equal to its seed again (`ResetWay`), and the way of a site with a reset
endpoint of its own (`EndpointReset`: POST its `reset_url`).

A reset means the copy equals its seed again, nothing less (docs/reliability.md, Resets). A site map
entry may name an endpoint that does that (`"reset_url"`); `POST /sessions {"task_id": N, "reset": true}`
calls it for the task's sites before the session starts, and the pool calls it before a changed
replica's next lease. A reset succeeds when the endpoint answers 2xx in time and, if it answers JSON with
a `success` field, that field is true. An official WebArena-Verified image's environment-control
`/restart` is no such endpoint: it restarts the services and keeps the data, so it is refused at start
(`keeps_data_problems`); a copy of an official image is reset by a new container from the image, the
way `webarena_live.sites` adds beside this one.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from webarena_live.evaluator import SiteMap, answer_failed, placeholder, site_key
from webarena_live.replicas.ways import ResetOutcome

RESET_TIMEOUT = 300.0
"""Seconds one reset may take (a container restart is slow); `POST /sessions` may ask for less."""


def sites_without_reset(site_map: SiteMap, sites: tuple[str, ...]) -> list[str]:
    """The task's sites whose site map entry names no `reset_url`."""
    return [
        placeholder(site)
        for site in sites
        if (env := site_map.environments.get(site_key(site))) is None or not env.reset_url
    ]


async def reset_endpoint(client: httpx.AsyncClient, site: str, url: str, timeout: float) -> ResetOutcome:
    """POST one reset endpoint and read its answer (a replica's or a site's)."""
    started = time.perf_counter()

    def outcome(ok: bool, detail: str, status: int | None = None) -> ResetOutcome:
        seconds = round(time.perf_counter() - started, 3)
        return ResetOutcome(
            site=placeholder(site), url=url, ok=ok, status=status, seconds=seconds, detail=detail
        )

    try:
        response = await client.post(url, timeout=timeout)
    except httpx.TimeoutException:
        return outcome(False, f"no answer within {timeout:g} s")
    except httpx.HTTPError as error:
        return outcome(False, f"{type(error).__name__}: {error}")
    text = response.text[:500]
    if not response.is_success:
        return outcome(False, f"HTTP {response.status_code}: {text}", response.status_code)
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and body.get("success") is False:
        return outcome(
            False, f"the endpoint reports failure: {body.get('message') or text}", response.status_code
        )
    return outcome(
        True, (body.get("message") if isinstance(body, dict) else None) or "reset", response.status_code
    )


@dataclass(frozen=True)
class EndpointReset:
    """A replica reset by POSTing its `reset_url`."""

    site: str
    url: str
    kind: str = "endpoint"

    async def reset(self, timeout: float) -> ResetOutcome:
        async with httpx.AsyncClient(trust_env=False) as client:  # never through a proxy from the environment
            return await reset_endpoint(client, self.site, self.url, timeout)

    async def bring_up(self) -> ResetOutcome | None:
        return None

    def changed(self) -> None:
        return None


PROBE_TIMEOUT = 30.0
"""Seconds a probe of a replica may take before it counts as no answer."""


async def probe_endpoint(client: httpx.AsyncClient, url: str, *, strict: bool) -> str | None:
    """Ask a replica whether it is up: GET `url` (redirects followed). None when it is; else what it
    answered. `strict` (its own `health_url`): only a 2xx is up; else (its start URL) any answer that does
    not show the site failing (`answer_failed`: no connection, a timeout, 500, 502-504)."""
    try:
        response = await client.get(url, timeout=PROBE_TIMEOUT, follow_redirects=True)
    except httpx.TimeoutException:
        return f"GET {url}: no answer within {PROBE_TIMEOUT:g} s"
    except httpx.HTTPError as error:
        return f"GET {url}: {type(error).__name__}: {error}"
    status = response.status_code
    if (strict and not response.is_success) or (not strict and answer_failed(status)):
        return f"GET {url}: HTTP {status}"
    return None


async def reset_sites(
    site_map: SiteMap, sites: tuple[str, ...], *, timeout: float = RESET_TIMEOUT
) -> list[ResetOutcome]:
    """Reset every one of `sites` that names a `reset_url`, concurrently; one outcome per site."""
    targets = []
    for site in sites:
        env = site_map.environments.get(site_key(site))
        if env is not None and env.reset_url:
            targets.append((site_key(site), env.reset_url))
    async with httpx.AsyncClient(trust_env=False) as client:  # never through a proxy from the environment
        return list(
            await asyncio.gather(*(reset_endpoint(client, site, url, timeout) for site, url in targets))
        )


ENV_CTRL_ROUTES = ("/restart", "/start", "/init", "/stop")
"""The environment-control server's POST routes (WebArena-Verified's `packages/environment_control`,
`server/app.py`): none of them resets the site's data."""


def _looks_like_env_ctrl(status: Any) -> bool:
    """Whether a `GET /status` answer has env-ctrl's shape: `{"success": …, "details": {"value":
    {"services": {…}}}}` (its `ops/types.py`, `Result.to_dict` over a `Health`)."""
    details = status.get("details") if isinstance(status, dict) else None
    value = details.get("value") if isinstance(details, dict) else None
    return "success" in status and isinstance(value, dict) and isinstance(value.get("services"), dict)


def keeps_data_problems(site_map: SiteMap, *, probe_timeout: float = 2.0) -> list[str]:
    """Each replica whose `reset_url` is an environment-control server's route (by its path, or because
    its server answers `GET /status` as env-ctrl does): such a "reset" restarts the services and keeps
    the data, so a changed copy would be leased with the change in it. One line each, saying what to
    use instead."""
    problems = []
    with httpx.Client(trust_env=False, timeout=probe_timeout) as client:
        for name, env in sorted(site_map.environments.items()):
            for index, replica in enumerate(env.replicas):
                url = replica.reset_url
                if not url:
                    continue
                parts = urlsplit(url)
                route = "/" + parts.path.rstrip("/").rsplit("/", 1)[-1]
                answered_like = False
                if route not in ENV_CTRL_ROUTES:
                    try:
                        answer = client.get(f"{parts.scheme}://{parts.netloc}/status")
                        answered_like = _looks_like_env_ctrl(answer.json())
                    except (httpx.HTTPError, ValueError):
                        answered_like = False
                if route in ENV_CTRL_ROUTES or answered_like:
                    problems.append(
                        f"{placeholder(name)} replica {index}: reset_url {url} is a WebArena-Verified "
                        "environment-control server"
                        + ("" if route in ENV_CTRL_ROUTES else " (its /status answers as env-ctrl's)")
                        + ", whose routes restart the site's services and keep its data: a changed copy "
                        "would be leased with the change still in it. Give the site as container copies "
                        '("image" and "replicas" instead of "urls": a reset is then a new container '
                        "from the image; docs/guides/official-dataset.md), or a reset_url that really "
                        "brings the site back to its seed"
                    )
    return problems
