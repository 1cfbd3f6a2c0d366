"""Environment reset before a session: POST each of the task's sites' `reset_url` and wait for the answer.

Official WebArena deployments run an environment-control server beside each
site, whose restart endpoint brings the site back to its initial state; a
harness calls it before a task so that no earlier attempt's changes leak in.
A site map entry may name such an endpoint (`"reset_url"`), and
`POST /sessions {"task_id": N, "reset": true}` calls it for the task's sites,
all at once, before the session starts. A reset succeeds when the endpoint
answers 2xx in time and, if it answers JSON with a `success` field (as the
environment-control server does), that field is true. Any failure is reported
per site and the session does not start.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import asdict, dataclass
from typing import Any

import httpx

from webarena_live.evaluator import SiteMap, answer_failed, placeholder, site_key

RESET_TIMEOUT = 300.0
"""Seconds one reset may take (a container restart is slow); `POST /sessions` may ask for less."""


@dataclass(frozen=True)
class ResetOutcome:
    """What one site's reset endpoint answered."""

    site: str
    url: str | None
    ok: bool
    seconds: float
    detail: str
    status: int | None = None

    def view(self) -> dict[str, Any]:
        """As a reply lists it: every field, `status` included (None when nothing answered)."""
        return asdict(self)


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
