"""The one place a session starts and ends in a process (control/starts.py, `SessionEnds`): the real app
over httpx's ASGI transport, a real pool of two replicas and real reset endpoints on 127.0.0.1."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx

from scripts.support.reset_endpoint import ResetEndpoint, reset_endpoints
from tests.support.addon_helpers import browser_headers, make_flow
from webarena_live.control.app import create_app
from webarena_live.control.authority import PoolAuthority
from webarena_live.control.context import ControlContext
from webarena_live.evaluator import SiteMap, load_tasks
from webarena_live.proxy.capture import event_from_flow
from webarena_live.replicas import Isolation
from webarena_live.replicas.pool import ReplicaPool
from webarena_live.runs.sessions import SessionStore
from webarena_live.runs.settings import RunSettings

TASKS = load_tasks("demo")
READ = 1001
URLS = ("http://shop-a.test:7771", "http://shop-b.test:7772")
ANSWER = {"task_type": "retrieve", "status": "SUCCESS", "retrieved_data": ["x"]}


def control(
    endpoints: list[ResetEndpoint], tmp_path: Path, store: SessionStore | None = None
) -> ControlContext:
    replicas = [{"urls": [url], "reset_url": e.url} for url, e in zip(URLS, endpoints, strict=True)]
    mapped = SiteMap.from_config({"environments": {"__SHOPPING__": {"replicas": replicas}}}, source="test")
    store = store or SessionStore(RunSettings(mapped, journal_dir=tmp_path / "journal"))
    return ControlContext(
        tasks=TASKS, sessions=store, authority=PoolAuthority(ReplicaPool(mapped, Isolation.EXCLUSIVE))
    )


def run(
    tmp_path: Path,
    scenario: Callable[[list[ResetEndpoint], ControlContext, httpx.AsyncClient], Awaitable[None]],
) -> None:
    async def main(endpoints: list[ResetEndpoint]) -> None:
        ctx = control(endpoints, tmp_path)
        transport = httpx.ASGITransport(app=create_app(ctx))
        async with httpx.AsyncClient(transport=transport, base_url="http://control") as client:
            await scenario(endpoints, ctx, client)

    with reset_endpoints(2) as endpoints:
        asyncio.run(main(endpoints))


def visit(ctx: ControlContext, session: str, base: str) -> None:
    page = make_flow(url=f"{base}/aurora-desk-lamp.html", headers=browser_headers(navigate=True))
    ctx.sessions.get_or_create(session).append(event_from_flow(page))


def test_a_start_leases_and_a_finish_gives_the_replica_back_by_its_notice(tmp_path: Path) -> None:
    async def scenario(
        endpoints: list[ResetEndpoint], ctx: ControlContext, client: httpx.AsyncClient
    ) -> None:
        assert isinstance(ctx.authority, PoolAuthority)
        started = await client.post("/sessions", json={"task_id": READ, "session": "a"})
        assert started.status_code == 200, started.text
        held = started.json()["replicas"]["__SHOPPING__"]
        assert started.json()["start_urls"] == [held] and set(ctx.authority.pool.leases) == {"a"}
        visit(ctx, "a", held)
        finished = await client.post("/sessions/a/finish", json=ANSWER)
        assert finished.status_code == 200, finished.text
        lease = ctx.sessions.get_or_create("a").attempt.lease
        assert ctx.authority.pool.leases == {} and lease is not None and lease.ended == "finished"
        # the same answer again: the first verdict, and nothing given back twice
        again = await client.post("/sessions/a/finish", json=ANSWER)
        assert again.status_code == 200 and again.headers["x-webarena-live-repeated"] == "true"
        assert ctx.authority.pool.status()["sites"]["__SHOPPING__"]["resets_skipped"] == 1

    run(tmp_path, scenario)


def test_a_finish_outside_the_route_frees_the_lease_too(tmp_path: Path) -> None:
    """The `finished` notice ends it, whoever finished the session (here the session store itself)."""

    async def scenario(
        endpoints: list[ResetEndpoint], ctx: ControlContext, client: httpx.AsyncClient
    ) -> None:
        assert isinstance(ctx.authority, PoolAuthority)
        held = (await client.post("/sessions", json={"task_id": READ, "session": "b"})).json()
        visit(ctx, "b", held["replicas"]["__SHOPPING__"])
        ctx.sessions.get_or_create("b").finish(ANSWER)
        assert ctx.authority.pool.leases == {}
        # the replica is free for the next session at once (read only: no reset)
        next_one = await client.post("/sessions", json={"task_id": READ, "session": "c"})
        assert next_one.status_code == 200 and endpoints[0].calls == endpoints[1].calls == 0

    run(tmp_path, scenario)


def test_a_refused_reset_gives_the_lease_back_and_starts_nothing(tmp_path: Path) -> None:
    async def scenario(
        endpoints: list[ResetEndpoint], ctx: ControlContext, client: httpx.AsyncClient
    ) -> None:
        assert isinstance(ctx.authority, PoolAuthority)
        for endpoint in endpoints:
            endpoint.mode = "error"
        refused = await client.post("/sessions", json={"task_id": READ, "session": "r", "reset": True})
        assert refused.status_code == 502 and refused.json()["error"] == "reset_failed", refused.text
        assert ctx.authority.pool.leases == {} and ctx.sessions.get("r") is None
        assert sum(endpoint.calls for endpoint in endpoints) == 1  # the leased replica's endpoint only
        for endpoint in endpoints:
            endpoint.mode = "ok"
        started = await client.post("/sessions", json={"task_id": READ, "session": "r", "reset": True})
        assert started.status_code == 200 and [r["ok"] for r in started.json()["reset"]] == [True]
        assert set(ctx.authority.pool.leases) == {"r"}

    run(tmp_path, scenario)


def test_a_rebuilt_context_on_the_same_sessions_ends_them_on_its_own_pool(tmp_path: Path) -> None:
    """The proxy builds a new control context when reconfigured; the sessions it keeps end on the new
    context's pool, and the old context's ends no longer listen (one per store)."""

    async def scenario(
        endpoints: list[ResetEndpoint], ctx: ControlContext, client: httpx.AsyncClient
    ) -> None:
        assert isinstance(ctx.authority, PoolAuthority)
        old_pool = ctx.authority.pool
        rebuilt = control(endpoints, tmp_path, store=ctx.sessions)
        assert isinstance(rebuilt.authority, PoolAuthority) and rebuilt.authority.pool is not old_pool
        transport = httpx.ASGITransport(app=create_app(rebuilt))
        async with httpx.AsyncClient(transport=transport, base_url="http://control") as again:
            held = (await again.post("/sessions", json={"task_id": READ, "session": "d"})).json()
            old_pool.leases["d"] = rebuilt.authority.pool.leases[
                "d"
            ]  # were the old ends listening, they would pop it
            visit(rebuilt, "d", held["replicas"]["__SHOPPING__"])
            assert (await again.post("/sessions/d/finish", json=ANSWER)).status_code == 200
        assert rebuilt.authority.pool.leases == {} and "d" in old_pool.leases

    run(tmp_path, scenario)
