"""The front's door for its Ray workers (`fleet/front/door.py`), in process: only the fleet's token
gets in, and the agent's address the worker passes on becomes the request's client."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from fastapi import FastAPI, Request

from webarena_live.addresses.headers import CLIENT_HEADER, FLEET_HEADER
from webarena_live.fleet.front.door import WorkersDoor


def _echo() -> FastAPI:
    app = FastAPI()

    @app.get("/seen")
    async def seen(request: Request) -> dict[str, Any]:
        client = request.client.host if request.client else None
        return {"client": client, "headers": sorted(name.lower() for name in request.headers)}

    return app


def _get(door: WorkersDoor, headers: dict[str, str]) -> httpx.Response:
    async def ask() -> httpx.Response:
        transport = httpx.ASGITransport(app=door, client=("10.0.0.7", 5000))
        async with httpx.AsyncClient(transport=transport, base_url="http://front") as client:
            return await client.get("/seen", headers=headers)

    return asyncio.run(ask())


def test_only_the_fleets_token_gets_in() -> None:
    door = WorkersDoor(_echo(), "fleet-secret")
    for headers in ({}, {FLEET_HEADER: "guess"}, {"Authorization": "Bearer fleet-secret"}):
        refused = _get(door, headers)
        assert refused.status_code == 403 and refused.json()["error"] == "not_a_worker"
    assert door.refused == 3


def test_the_agents_address_becomes_the_client_and_the_fleets_headers_go_no_further() -> None:
    door = WorkersDoor(_echo(), "fleet-secret")
    passed = _get(door, {FLEET_HEADER: "fleet-secret", CLIENT_HEADER: "10.0.0.9"})
    assert passed.status_code == 200
    seen = passed.json()
    assert seen["client"] == "10.0.0.9"
    assert FLEET_HEADER.lower() not in seen["headers"] and CLIENT_HEADER.lower() not in seen["headers"]
    plain = _get(door, {FLEET_HEADER: "fleet-secret"}).json()
    assert plain["client"] == "10.0.0.7"  # no address passed on: the connection's own
