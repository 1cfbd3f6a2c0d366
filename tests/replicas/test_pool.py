"""The replica pool (`replicas/pool.py`) on its own: leases under each isolation policy, resets only
where something changed, failing reset endpoints, interference. Reset endpoints are real HTTP servers on
127.0.0.1 in the environment-control shape (`scripts/support/reset_endpoint.py`)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from scripts.support.reset_endpoint import ResetEndpoint, reset_endpoints
from tests.support.addon_helpers import browser_headers, make_flow
from tests.support.control_in_process import call
from webarena_live.control.authority import PoolAuthority
from webarena_live.control.context import ControlContext
from webarena_live.evaluator import SiteMap, load_tasks
from webarena_live.proxy.capture import event_from_flow
from webarena_live.replicas import Isolation, NoReplica, default_isolation, isolation_problems
from webarena_live.replicas.build import build_pool
from webarena_live.replicas.pool import ReplicaPool
from webarena_live.runs.sessions import SessionStore
from webarena_live.runs.settings import RunSettings

TASKS = load_tasks("demo")
READ, READ_TOO, MUTATE, MUTATE_TOO = TASKS[1001], TASKS[1002], TASKS[1004], TASKS[1005]
URLS = ("http://shop-a.test:7771", "http://shop-b.test:7772")


def site_map(endpoints: list[ResetEndpoint], urls: tuple[str, ...] = URLS) -> SiteMap:
    replicas = [{"urls": [url], "reset_url": e.url} for url, e in zip(urls, endpoints, strict=True)]
    return SiteMap.from_config({"environments": {"__SHOPPING__": {"replicas": replicas}}}, source="test")


def run(scenario: Callable[[list[ResetEndpoint]], Awaitable[None]], count: int = 2, **options: Any) -> None:
    with reset_endpoints(count, **options) as endpoints:
        asyncio.run(scenario(endpoints))


async def settled(pool: ReplicaPool, timeout: float = 10) -> None:
    """Until no reset runs (the pool resets in the background)."""
    deadline = time.monotonic() + timeout
    while any(r.resetting for rs in pool.replicas.values() for r in rs):
        assert time.monotonic() < deadline, pool.status()
        await asyncio.sleep(0.02)


def states(pool: ReplicaPool) -> list[str]:
    return [r["state"] for r in pool.status()["sites"]["__SHOPPING__"]["replicas"]]


def test_the_default_policy_is_readers_only_with_two_replicas_somewhere() -> None:
    with reset_endpoints(2) as endpoints:
        assert default_isolation(site_map(endpoints)) is Isolation.READERS
        assert default_isolation(site_map(endpoints[:1], URLS[:1])) is Isolation.NONE
    plain = SiteMap.from_config({"environments": {"__SHOPPING__": {"urls": [URLS[0]]}}}, source="t")
    assert isolation_problems(plain, Isolation.NONE) == []
    (problem,) = isolation_problems(plain, Isolation.READERS)
    assert "__SHOPPING__ replica 0" in problem and "reset_url" in problem


def test_exclusive_one_session_a_replica_and_a_503_with_retry_after_when_none_is_free() -> None:
    async def scenario(endpoints: list[ResetEndpoint]) -> None:
        pool = ReplicaPool(site_map(endpoints), Isolation.EXCLUSIVE)
        first = await pool.lease("a", READ)
        second = await pool.lease("b", READ_TOO)
        assert {first.indexes["shopping"], second.indexes["shopping"]} == {0, 1}
        with pytest.raises(NoReplica) as refused:
            await pool.lease("c", READ)
        assert refused.value.code == "no_replica" and refused.value.retry_after > 0
        assert "c" not in pool.leases
        waiting = asyncio.create_task(pool.lease("c", READ, wait=5))
        await asyncio.sleep(0.1)
        assert pool.status()["waiting"] == 1
        pool.end_lease("a", "finished")  # read only: back at once, no reset
        third = await waiting
        assert third.indexes == first.indexes and endpoints[0].calls == endpoints[1].calls == 0
        assert pool.status()["sites"]["__SHOPPING__"]["resets_skipped"] == 1

    run(scenario)


def test_readers_share_and_a_mutating_task_holds_its_replica_alone() -> None:
    async def scenario(endpoints: list[ResetEndpoint]) -> None:
        pool = ReplicaPool(site_map(endpoints), Isolation.READERS)
        readers = [await pool.lease(f"r{i}", READ) for i in range(3)]
        writer = await pool.lease("w", MUTATE)
        taken = {lease.indexes["shopping"] for lease in readers}
        assert writer.indexes["shopping"] not in taken and len(taken) == 1  # readers together, writer alone
        with pytest.raises(NoReplica):  # a second writer: one replica has readers, the other a writer
            await pool.lease("w2", MUTATE_TOO)
        assert (await pool.lease("r3", READ_TOO)).indexes == readers[0].indexes

    run(scenario)


def test_none_puts_everyone_anywhere_the_least_busy_first_and_resets_nothing_unasked() -> None:
    async def scenario(endpoints: list[ResetEndpoint]) -> None:
        pool = ReplicaPool(site_map(endpoints), Isolation.NONE)
        leases = [await pool.lease(f"s{i}", MUTATE) for i in range(4)]
        assert sorted(lease.indexes["shopping"] for lease in leases) == [0, 0, 1, 1]
        pool.log.record(f"{URLS[0]}/checkout/cart/add/", "s0", "POST")
        for lease in leases:
            pool.end_lease(lease.session, "finished")
        await settled(pool)
        assert endpoints[0].calls == 0 and states(pool) == ["dirty", "free"]

    run(scenario)


def test_only_a_changed_replica_is_reset_once_and_leased_only_after() -> None:
    async def scenario(endpoints: list[ResetEndpoint]) -> None:
        pool = ReplicaPool(site_map(endpoints), Isolation.EXCLUSIVE)
        a, b = await pool.lease("a", MUTATE), await pool.lease("b", READ)
        changed = URLS[a.indexes["shopping"]]
        assert pool.log.record(f"{changed}/checkout/cart/add/?x=1", "a", "POST") is not None
        assert pool.log.record(f"{changed}/", "a", "GET") is None  # a read changes nothing
        pool.end_lease("a", "finished")
        pool.end_lease("b", "finished")
        assert "resetting" in states(pool)
        waiting = await pool.lease("c", READ, wait=5)  # only the clean replica, until the reset is done
        assert waiting.indexes == b.indexes
        await settled(pool)
        counts = pool.status()["sites"]["__SHOPPING__"]
        assert [e.done for e in endpoints][a.indexes["shopping"]] == 1 and sum(
            e.calls for e in endpoints
        ) == 1
        assert (counts["resets"], counts["resets_skipped"]) == (1, 1) and counts["reset_seconds"] >= 0.2
        assert states(pool)[a.indexes["shopping"]] == "free"

    run(scenario, delay=0.2)


@pytest.mark.parametrize("fault", ["error", "refuse", "hang"])
def test_a_failing_reset_takes_its_replica_out_and_the_run_goes_on_on_the_others(fault: str) -> None:
    async def scenario(endpoints: list[ResetEndpoint]) -> None:
        pool = ReplicaPool(site_map(endpoints), Isolation.EXCLUSIVE, reset_timeout=0.5)
        lease = await pool.lease("a", MUTATE)
        broken = lease.indexes["shopping"]
        endpoints[broken].mode = fault
        pool.log.record(f"{URLS[broken]}/checkout/cart/add/", "a", "POST")
        pool.end_lease("a", "finished")
        deadline = time.monotonic() + 5
        while states(pool)[broken] != "out_of_service":
            assert time.monotonic() < deadline, pool.status()
            await asyncio.sleep(0.02)
        replica = pool.status()["sites"]["__SHOPPING__"]["replicas"][broken]
        assert replica["reason"] and pool.status()["sites"]["__SHOPPING__"]["out_of_service"] == 1
        for name in ("b", "c"):  # never the broken one
            got = await pool.lease(name, READ, wait=1) if name == "b" else None
            if got is not None:
                assert got.indexes["shopping"] != broken
        with pytest.raises(NoReplica):
            await pool.lease("c", READ)
        endpoints[broken].mode = "ok"  # mended: the retry brings it back, clean
        pool.end_lease("b", "finished")
        back = await pool.lease("d", MUTATE, wait=10)
        assert states(pool).count("leased") == 1 and back.session == "d"
        await pool.close()

    run(scenario)


def test_interference_names_other_sessions_mutations_on_the_replicas_held() -> None:
    async def scenario(endpoints: list[ResetEndpoint]) -> None:
        pool = ReplicaPool(site_map(endpoints), Isolation.NONE)
        reader = await pool.lease("reader", READ)
        here = URLS[reader.indexes["shopping"]]
        assert pool.interference("reader")["exposed"] is False
        pool.log.record(f"{here}/wishlist/add", "reader", "POST")  # its own change is no interference
        pool.log.record(f"{URLS[1 - reader.indexes['shopping']]}/cart", "other", "POST")  # another copy
        assert pool.interference("reader")["exposed"] is False
        pool.log.record(f"{here}/checkout/cart/add/", "writer", "PUT")
        seen = pool.interference("reader")
        assert seen["exposed"] is True and [(m["session"], m["method"]) for m in seen["mutations"]] == [
            ("writer", "PUT")
        ]
        assert seen["replicas"] == {"__SHOPPING__": here}

    run(scenario)


def test_an_idle_lease_ends_a_used_one_stays_and_its_changed_replica_is_reset() -> None:
    """`--lease-timeout` counts idle time: a lease touched (a request, a control call) within it
    stays, however long ago it started; one left idle ends as `timeout`."""

    async def scenario(endpoints: list[ResetEndpoint]) -> None:
        pool = ReplicaPool(site_map(endpoints), Isolation.EXCLUSIVE, lease_timeout=0.4)
        lease = await pool.lease("gone", MUTATE)
        busy = await pool.lease("busy", READ)
        pool.log.record(f"{URLS[lease.indexes['shopping']]}/x", "gone", "DELETE")
        assert pool.expire() == []
        for _ in range(5):  # 0.75 s in all, past the timeout since the start, touched all along
            await asyncio.sleep(0.15)
            busy.touch()
            assert "busy" in pool.leases
        assert pool.expire() == ["gone"] and "gone" not in pool.leases
        assert lease.ended == "timeout" and lease.ended_early == "timeout" and "busy" in pool.leases
        await settled(pool)
        assert endpoints[lease.indexes["shopping"]].done == 1

    run(scenario)


def test_abandon_ends_the_lease_with_its_reason_and_frees_the_replica_at_once() -> None:
    async def scenario(endpoints: list[ResetEndpoint]) -> None:
        pool = ReplicaPool(site_map(endpoints[:1], URLS[:1]), Isolation.EXCLUSIVE)
        lease = await pool.lease("quitter", READ)
        with pytest.raises(NoReplica) as refused:
            await pool.lease("next", READ)
        assert "replica 0 held by 1 reader (quitter)" in str(refused.value.detail)
        assert pool.end_lease("quitter", "abandoned", "the gym closed") is lease
        assert (lease.ended, lease.ended_detail) == ("abandoned", "the gym closed")
        assert (await pool.lease("next", READ)).indexes == {"shopping": 0}  # read only: no reset needed

    run(scenario, count=1)


def test_readers_pack_so_the_free_copies_stay_free_for_mutating_tasks_and_the_503_says_why() -> None:
    """Three copies under `readers`: four readers first take one copy together, so both mutating tasks
    after them get a copy of their own; the next start is refused naming each copy's state in words."""
    urls = ("http://shop-a.test:7771", "http://shop-b.test:7772", "http://shop-c.test:7773")

    async def scenario(endpoints: list[ResetEndpoint]) -> None:
        pool = ReplicaPool(site_map(endpoints, urls), Isolation.READERS)
        readers = [await pool.lease(f"r{i}", READ) for i in range(4)]
        assert {lease.indexes["shopping"] for lease in readers} == {0}
        writers = [await pool.lease(f"w{i}", MUTATE) for i in range(2)]
        assert sorted(lease.indexes["shopping"] for lease in writers) == [1, 2]
        pool.log.record(f"{urls[1]}/checkout/cart/add/", "w0", "POST")
        pool.end_lease("w0", "finished")  # changed: reset in the background, leased to nobody meanwhile
        with pytest.raises(NoReplica) as refused:
            await pool.lease("w2", MUTATE_TOO)
        detail = refused.value.detail
        assert "replica 0 held by 4 readers (r0, r1, r2, r3)" in detail, detail
        assert "replica 1 resetting" in detail and "replica 2 held by a mutating task (session w1)" in detail
        await settled(pool)
        assert (await pool.lease("w2", MUTATE_TOO)).indexes == {"shopping": 1}

    run(scenario, count=3, delay=0.3)


def test_a_resumed_session_keeps_its_lease_and_its_start_urls_name_its_replica(tmp_path) -> None:
    """A restart (a new store and pool, the same output directory): `resume_journal` gives the session
    the replica it held, from the pool's lease book."""

    def control(endpoints: list[ResetEndpoint]) -> ControlContext:
        mapped = site_map(endpoints)
        store = SessionStore(
            RunSettings(mapped, output_dir=tmp_path / "out", journal_dir=tmp_path / "journal")
        )
        pool = build_pool(mapped, Isolation.EXCLUSIVE, None, state_file=tmp_path / "out" / ".pool.json")
        return ControlContext(tasks=TASKS, sessions=store, authority=PoolAuthority(pool))

    async def scenario(endpoints: list[ResetEndpoint]) -> None:
        first = control(endpoints)
        assert call(first, "POST", "/sessions", {"task_id": 1001, "session": "other"})[0] == 200
        status, started = call(first, "POST", "/sessions", {"task_id": 1001, "session": "s"})
        held = started["replicas"]["__SHOPPING__"]
        assert status == 200 and held == URLS[1] and started["start_urls"] == [URLS[1]]
        first.sessions.get_or_create("s").append(
            event_from_flow(
                make_flow(url=f"{held}/aurora-desk-lamp.html", headers=browser_headers(navigate=True))
            )
        )
        again = control(endpoints)  # the proxy restarted: nobody holds anything
        body = {"task_id": 1001, "session": "s", "resume_journal": True}
        status, resumed = call(again, "POST", "/sessions", body)
        assert status == 200 and resumed["resumed_events"] == 1
        assert resumed["replicas"] == {"__SHOPPING__": held} and isinstance(again.authority, PoolAuthority)
        assert again.authority.pool.leases["s"].indexes == {"shopping": 1}
        assert call(again, "GET", "/sessions/s")[1]["replicas"] == {"__SHOPPING__": held}

    run(scenario)


def test_a_change_after_the_lease_ended_is_reset_before_the_next_lease() -> None:
    """A request still in flight when its session's lease ended (or a worker's mutation gathered after
    the release) changes a replica nobody holds: it is reset at once, and the next session gets it."""

    async def scenario(endpoints: list[ResetEndpoint]) -> None:
        pool = ReplicaPool(site_map(endpoints, URLS[:1]), Isolation.EXCLUSIVE)
        await pool.lease("a", READ)
        pool.end_lease("a", "finished")  # nothing changed yet: no reset
        assert pool.log.record(f"{URLS[0]}/checkout/cart/add/?x=1", "a", "POST") is not None
        following = await pool.lease("b", READ, wait=5)  # waits for the reset, then gets the replica
        assert following.indexes == {"shopping": 0} and endpoints[0].done == 1
        replica = pool.replicas["shopping"][0]
        assert not replica.dirty and [r["why"] for r in replica.resets] == ["changed after its lease ended"]

    run(scenario, count=1, delay=0.2)


def test_the_pool_state_is_kept_where_its_folder_does_not_exist_yet(tmp_path, caplog) -> None:
    """On a new machine the default state folder (`~/.local/state/webarena-live/journal`) is made by
    the first journal; the pool writes its state before any: it makes the folder itself."""
    state = tmp_path / "new" / "state" / ".pool.json"
    build_pool(SiteMap.from_urls({"shopping": list(URLS)}), Isolation.NONE, None, state_file=state)
    assert state.is_file() and "cannot keep the pool's state" not in caplog.text


def test_a_lease_end_naming_no_end_reason_is_refused_and_ends_nothing(tmp_path) -> None:
    """`PUT /sessions/{s}/lease_ended` (a front telling its worker) with a word that is no `EndReason` is a
    400 naming the words it takes, and the lease goes on; a known word ends it as told."""

    async def scenario(endpoints: list[ResetEndpoint]) -> None:
        mapped = site_map(endpoints)
        store = SessionStore(RunSettings(mapped, output_dir=tmp_path / "out"))
        ctx = ControlContext(
            tasks=TASKS, sessions=store, authority=PoolAuthority(ReplicaPool(mapped, Isolation.EXCLUSIVE))
        )
        assert call(ctx, "POST", "/sessions", {"task_id": 1001, "session": "s"})[0] == 200
        status, refused = call(ctx, "PUT", "/sessions/s/lease_ended", {"ended": "exploded"})
        assert status == 400 and refused["error"] == "bad_lease_end", refused
        assert "timeout" in refused["detail"] and "abandoned" in refused["detail"], refused
        assert isinstance(ctx.authority, PoolAuthority) and ctx.authority.pool.leases["s"].ended is None
        status, _ = call(ctx, "PUT", "/sessions/s/lease_ended", {"ended": "timeout", "reason": "idle"})
        assert status == 200 and call(ctx, "GET", "/sessions/s")[1]["lease_ended"] == "timeout"

    run(scenario)
