"""When a new copy is ready to lease: as the reference waits for one (its `ContainerManager`'s
`_wait_for_ready`), env-ctrl's `GET /status` says success (every service up), then the site's health
path answers below 500 (a login page may answer 4xx: the site is up)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import httpx

from webarena_live.sites.plan import CopyPlan

POLL_SECONDS = 1.0
ALIVE_EVERY = 5
"""Every how many polls the container itself is asked whether it still runs (a crash ends the wait)."""


async def _status_ok(client: httpx.AsyncClient, url: str) -> bool:
    try:
        answer = await client.get(url)
        body = answer.json()
    except (httpx.HTTPError, ValueError):
        return False
    return answer.status_code == 200 and isinstance(body, dict) and body.get("success") is True


async def _site_up(client: httpx.AsyncClient, url: str) -> bool:
    try:
        answer = await client.get(url)
    except httpx.HTTPError:
        return False
    return answer.status_code < 500


async def wait_ready(copy: CopyPlan, alive: Callable[[], Awaitable[str | None]]) -> str | None:
    """Wait until `copy` is ready, at most its `ready_timeout`; None when it is, else why not. `alive`
    tells why its container no longer runs (None while it does)."""
    deadline = time.monotonic() + copy.ready_timeout
    polls = 0
    env_ctrl_done = copy.env_ctrl_url is None
    async with httpx.AsyncClient(trust_env=False, timeout=10.0) as client:
        while True:
            if not env_ctrl_done:
                env_ctrl_done = await _status_ok(client, f"{copy.env_ctrl_url}/status")
            if env_ctrl_done and await _site_up(client, copy.health_url):
                return None
            polls += 1
            if polls % ALIVE_EVERY == 0 and (dead := await alive()) is not None:
                return dead
            if time.monotonic() >= deadline:
                waited = "env-ctrl's /status never said success" if not env_ctrl_done else (
                    f"{copy.health_url} never answered below 500"
                )  # fmt: skip
                return f"not ready within {copy.ready_timeout:g} s: {waited}"
            await asyncio.sleep(POLL_SECONDS)
