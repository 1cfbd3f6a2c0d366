"""The pool watches its copies' health (`ReplicaPool.answered`): a copy whose judged answers are mostly
failures takes no new lease, is reset once its holders leave, probed, and serves again once it answers;
one still failing after its reset is out of service. Real counter sites and reset endpoints on 127.0.0.1
(`tests/support/counter_replicas.py`); the pool on its own, driven as the proxy drives it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import pytest

from tests.support.counter_replicas import Counter, counters
from webarena_live.evaluator import SiteMap, load_tasks
from webarena_live.replicas import Isolation, NoReplica
from webarena_live.replicas.pool import ReplicaPool

TASKS = load_tasks("demo")
READ, MUTATE = TASKS[1001], TASKS[1004]


def pool_of(replicas: list[Counter], isolation: Isolation = Isolation.READERS) -> ReplicaPool:
    entries = [{"urls": [r.url], "reset_url": r.reset.url} for r in replicas]
    site_map = SiteMap.from_config({"environments": {"__SHOPPING__": {"replicas": entries}}}, source="test")
    return ReplicaPool(site_map, isolation, reset_timeout=5)


def state(pool: ReplicaPool, index: int) -> str:
    return str(pool.status()["sites"]["__SHOPPING__"]["replicas"][index]["state"])


async def until(check: Callable[[], bool], timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


def run(scenario: Callable[[list[Counter]], Awaitable[None]]) -> None:
    with counters(2) as replicas:
        asyncio.run(scenario(replicas))


def test_a_failing_copy_takes_no_lease_is_reset_when_left_and_serves_again_once_it_answers() -> None:
    async def scenario(replicas: list[Counter]) -> None:
        pool = pool_of(replicas)
        first = await pool.lease("a", READ)
        broken = first.indexes["shopping"]
        assert broken == 0  # readers take the least busy copy, the first
        pool.log.answered(f"{replicas[broken].url}/", 500)
        assert state(pool, broken) == "leased"  # one failure is not yet a pattern (min_answers 2)
        pool.log.answered(f"{replicas[broken].url}/", 500)
        assert pool.replicas["shopping"][broken].failing and state(pool, broken) == "failing"
        second = await pool.lease("b", READ)  # a reader would pack onto "a"'s copy: not a failing one
        assert second.indexes["shopping"] != broken
        assert replicas[broken].reset.calls == 0  # held: nothing resets under its holder
        pool.end_lease("a", "finished")
        await until(lambda: replicas[broken].reset.calls == 1 and state(pool, broken) == "free")
        health = pool.status()["sites"]["__SHOPPING__"]["replicas"][broken]
        assert "failing" not in health and health["resets"][-1]["why"].startswith("failing: 2 of")
        pool.end_lease("b", "finished")
        again = await pool.lease("c", READ)  # back in service: the first free copy again
        assert again.indexes["shopping"] == broken
        await pool.close()

    run(scenario)


def test_a_copy_still_failing_after_its_reset_is_out_of_service_and_the_other_takes_every_lease() -> None:
    async def scenario(replicas: list[Counter]) -> None:
        pool = pool_of(replicas, Isolation.EXCLUSIVE)
        replicas[0].site.server_close()  # its site is gone: connections refused, the probe too
        replicas[0].site.shutdown()
        for _ in range(2):
            pool.log.answered(f"{replicas[0].url}/", 0, "connection refused")
        await until(lambda: state(pool, 0) == "out_of_service")
        view = pool.status()["sites"]["__SHOPPING__"]["replicas"][0]
        assert "GET " in view["reason"] and view["failing"]
        for name in ("a", "b", "c"):
            lease = await pool.lease(name, MUTATE)
            assert lease.indexes["shopping"] == 1
            pool.end_lease(name, "finished")
            await until(lambda: state(pool, 1) == "free")
        with pytest.raises(NoReplica) as refused:
            await pool.lease("x", READ)
            await pool.lease("y", READ)
        assert "failing" in refused.value.detail or "out of service" in refused.value.detail
        await pool.close()

    run(scenario)


def test_under_none_a_failing_copy_is_only_watched() -> None:
    async def scenario(replicas: list[Counter]) -> None:
        pool = pool_of(replicas, Isolation.NONE)
        for _ in range(3):
            pool.log.answered(f"{replicas[0].url}/", 503)
        assert state(pool, 0) == "failing"
        lease = await pool.lease("a", READ)  # none keeps no one out, as on a single copy
        assert lease.indexes["shopping"] in (0, 1) and replicas[0].reset.calls == 0
        for _ in range(10):
            pool.log.answered(f"{replicas[0].url}/", 200)
        assert state(pool, 0) != "failing"
        await pool.close()

    run(scenario)
