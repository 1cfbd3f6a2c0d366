"""The lease authority, one seam (control/authority.py; docs/architecture.md, Leases): the pool's word in
a process that holds it, the front's told word on a worker, and nothing else asking which is which.

The real control app over httpx's ASGI transport, a real pool, the wire's real header codecs."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import httpx

from tests.support.addon_helpers import browser_headers, make_flow
from webarena_live.addresses.headers import INTERFERENCE_HEADER, LEASE_HEADER
from webarena_live.control.app import create_app
from webarena_live.control.authority import PoolAuthority, ToldLeases
from webarena_live.control.context import ControlContext
from webarena_live.control.wire import encode_interference, encode_lease
from webarena_live.evaluator import SiteMap, load_tasks
from webarena_live.proxy.capture import event_from_flow
from webarena_live.replicas import Isolation, Lease, MutationLog, lease_of
from webarena_live.replicas.pool import ReplicaPool
from webarena_live.runs.sessions import SessionStore
from webarena_live.runs.settings import RunSettings

ADDON = Path(__file__).resolve().parents[2] / "addon"
TASKS = load_tasks("demo")
READ = 1001
URLS = ("http://shop-a.test:7771", "http://shop-b.test:7772")
SITE_MAP = SiteMap.from_config(
    {"environments": {"__SHOPPING__": {"replicas": [{"urls": [url]} for url in URLS]}}}, source="test"
)
ANSWER = {"task_type": "retrieve", "status": "SUCCESS", "retrieved_data": ["x"]}
TOPOLOGY = re.compile(
    r"\b(?:ctx|context|front|self)\.(?:pool|leases) is (?:not )?None|\bpool is (?:not )?None"
)
SEAM = {ADDON / "control" / "authority.py"}


def call(ctx: ControlContext, method: str, path: str, body: object = None, **headers: str) -> httpx.Response:
    async def send() -> httpx.Response:
        transport = httpx.ASGITransport(app=create_app(ctx))
        async with httpx.AsyncClient(transport=transport, base_url="http://control") as client:
            return await client.request(method, path, json=body, headers=headers)

    return asyncio.run(send())


def worker() -> ControlContext:
    return ControlContext(
        tasks=TASKS, sessions=SessionStore(RunSettings(SITE_MAP)), authority=ToldLeases(MutationLog(SITE_MAP))
    )


def test_a_pool_grants_its_own_lease_whatever_lease_header_a_client_sends() -> None:
    pool = ReplicaPool(SITE_MAP, Isolation.EXCLUSIVE)
    ctx = ControlContext(
        tasks=TASKS, sessions=SessionStore(RunSettings(SITE_MAP)), authority=PoolAuthority(pool)
    )
    forged = encode_lease(lease_of(SITE_MAP, {"shopping": 1}, "s"))
    started = call(ctx, "POST", "/sessions", {"task_id": READ, "session": "s"}, **{LEASE_HEADER: forged})
    assert started.status_code == 200, started.text
    assert pool.leases["s"].indexes == {"shopping": 0}  # the pool's choice, not the header's
    assert started.json()["replicas"] == {"__SHOPPING__": URLS[0]}


def test_a_worker_takes_the_lease_its_front_told_and_none_when_told_nothing() -> None:
    ctx = worker()
    told = encode_lease(lease_of(SITE_MAP, {"shopping": 1}, "s"))
    started = call(ctx, "POST", "/sessions", {"task_id": READ, "session": "s"}, **{LEASE_HEADER: told})
    assert started.status_code == 200, started.text
    assert started.json()["replicas"] == {"__SHOPPING__": URLS[1]}
    assert call(ctx, "POST", "/sessions", {"task_id": READ, "session": "bare"}).status_code == 200
    bare = ctx.sessions.get("bare")
    assert bare is not None and bare.attempt.lease is None


def visit(ctx: ControlContext, session: str, base: str) -> None:
    page = make_flow(url=f"{base}/aurora-desk-lamp.html", headers=browser_headers(navigate=True))
    ctx.sessions.get_or_create(session).append(event_from_flow(page))


def start(ctx: ControlContext, session: str, **headers: str) -> None:
    started = call(ctx, "POST", "/sessions", {"task_id": READ, "session": session}, **headers)
    assert started.status_code == 200, started.text


def test_a_worker_judges_interference_by_its_fronts_header_and_a_pool_by_its_own_word() -> None:
    words = {"exposed": True, "count": 1, "replicas": {"__SHOPPING__": URLS[0]},
             "mutations": [{"session": "o", "method": "POST", "url": f"{URLS[0]}/x"}]}  # fmt: skip
    header = {INTERFERENCE_HEADER: encode_interference(words)}
    ctx = worker()
    start(ctx, "s", **{LEASE_HEADER: encode_lease(lease_of(SITE_MAP, {"shopping": 0}, "s"))})
    visit(ctx, "s", URLS[0])
    finished = call(ctx, "POST", "/sessions/s/finish", ANSWER, **header)
    assert finished.status_code == 200, finished.text
    assert finished.json()["interference"]["exposed"] is True

    pool = ReplicaPool(SITE_MAP, Isolation.NONE)
    own = ControlContext(
        tasks=TASKS, sessions=SessionStore(RunSettings(SITE_MAP)), authority=PoolAuthority(pool)
    )
    start(own, "s")
    visit(own, "s", URLS[0])
    judged = call(own, "POST", "/sessions/s/finish", ANSWER, **header)  # a client's header is no word here
    assert judged.status_code == 200, judged.text
    assert judged.json()["interference"]["exposed"] is False


def test_an_abandon_ends_through_the_authority_in_either_topology() -> None:
    pool = ReplicaPool(SITE_MAP, Isolation.EXCLUSIVE)
    own = ControlContext(
        tasks=TASKS, sessions=SessionStore(RunSettings(SITE_MAP)), authority=PoolAuthority(pool)
    )
    ctx = worker()
    told = encode_lease(lease_of(SITE_MAP, {"shopping": 0}, "s"))
    for context, headers in ((own, {}), (ctx, {LEASE_HEADER: told})):
        assert (
            call(context, "POST", "/sessions", {"task_id": READ, "session": "s"}, **headers).status_code
            == 200
        )
        ended = call(context, "POST", "/sessions/s/abandon", {"reason": "stuck"})
        assert ended.status_code == 200, ended.text
        assert ended.json()["lease_ended"] == "abandoned" and ended.json()["reason"] == "stuck"
        session = context.sessions.get("s")
        assert session is not None and isinstance(session.attempt.lease, Lease)
        assert session.attempt.lease.ended == "abandoned"
    assert pool.leases == {} and pool.ended["s"].ended == "abandoned"  # the pool's own end, on its books


def test_no_module_outside_the_seam_asks_which_topology_it_runs_in() -> None:
    asking = [
        f"{path.relative_to(ADDON)}:{number}: {line.strip()}"
        for path in sorted(ADDON.rglob("*.py")) if path not in SEAM
        for number, line in enumerate(path.read_text().splitlines(), 1) if TOPOLOGY.search(line)
    ]  # fmt: skip
    assert asking == []


def test_the_topology_rule_finds_a_branch_when_there_is_one() -> None:
    assert TOPOLOGY.search("        if ctx.pool is not None:")
    assert TOPOLOGY.search("    if front.leases is None:")
    assert not TOPOLOGY.search("    if spool is not None and spool.usable:")
