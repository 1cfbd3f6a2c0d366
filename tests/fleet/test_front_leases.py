"""The front's lease and gathering logic (`fleet/front/leases.py`) on its own, against real workers' control
apps: each worker is the control API a `serve` worker runs (`control/app.py`, with a real `MutationLog` and
no pool), reached through httpx's ASGI transport at its own control URL; a worker that does not answer is a
closed port on 127.0.0.1. What is checked: the cursor (each mutation taken once), the epoch (a restarted
worker's log is read from its start: nothing lost, nothing taken twice), the leases of a worker that did not
answer kept, telling a worker a lease ended, and the interference carried on the forwarded finish.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from typing import Any

import httpx
import pytest

from webarena_live.addresses.headers import INTERFERENCE_HEADER, LEASE_HEADER
from webarena_live.addresses.placement import Placement
from webarena_live.control.app import create_app
from webarena_live.control.authority import INTERFERENCE_LISTED, ToldLeases
from webarena_live.control.context import ControlContext
from webarena_live.control.models import StartSession
from webarena_live.control.wire import LeaseEnd, decode_interference
from webarena_live.evaluator import NetworkEvent, SiteMap, load_tasks
from webarena_live.fleet.front import link as link_module
from webarena_live.fleet.front.leases import FrontLeases
from webarena_live.fleet.front.link import WorkerLink
from webarena_live.fleet.workers.local import Worker
from webarena_live.launch import Ports
from webarena_live.replicas import Isolation, MutationLog
from webarena_live.replicas.pool import ReplicaPool
from webarena_live.runs.sessions import SessionStore
from webarena_live.runs.settings import RunSettings

TASKS = load_tasks("demo")
READ = TASKS[1001]
URLS = ("http://shop-a.test:7771", "http://shop-b.test:7772")
SITE_MAP = SiteMap.from_config(
    {"environments": {"__SHOPPING__": {"replicas": [{"urls": [url]} for url in URLS]}}}, source="test"
)


def closed_port() -> int:
    """A port of 127.0.0.1 nothing listens on (bound, then closed): a worker that does not answer."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


class Fleet:
    """Workers as the front sees them (`Worker`), each a real worker control app at its control URL."""

    def __init__(self, count: int) -> None:
        self.workers = [Worker(i, Ports(0, 0, closed_port())) for i in range(count)]
        self.logs: dict[int, MutationLog] = {}
        self.contexts: dict[int, ControlContext] = {}
        self.mounts: dict[str, httpx.AsyncBaseTransport] = {}

    def start(self, index: int) -> MutationLog:
        """Worker `index` (started again, when it ran): a new process's control app and mutation log."""
        log = MutationLog(SITE_MAP)
        ctx = ControlContext(
            tasks=TASKS, sessions=SessionStore(RunSettings(SITE_MAP)), authority=ToldLeases(log)
        )
        self.logs[index], self.contexts[index] = log, ctx
        self.mounts[f"{self.workers[index].control_url}"] = httpx.ASGITransport(app=create_app(ctx))
        return log

    def client(self) -> httpx.AsyncClient:
        """The front's client: a worker not started is not mounted, so a call to it meets a closed port."""
        return httpx.AsyncClient(mounts=dict(self.mounts), trust_env=False)

    def link(self, http: httpx.AsyncClient) -> WorkerLink:
        """The front's way to these workers (`WorkerLink`), over `http`."""
        link = WorkerLink(self.workers, Placement(len(self.workers)), {}, token=None)
        link.http = http
        return link


def change(log: MutationLog, replica: int, session: str, path: str) -> None:
    assert log.record(f"{URLS[replica]}{path}", session, "POST") is not None  # a change, judged so


def taken(pool: ReplicaPool, replica: int) -> list[str]:
    """The URLs of the mutations the front's pool took on `replica`, in order."""
    return [m.url for m in pool.replicas["shopping"][replica].mutations]


def test_each_mutation_is_taken_once_and_a_restarted_worker_is_read_from_its_start() -> None:
    async def scenario() -> None:
        fleet = Fleet(1)
        leases = FrontLeases(ReplicaPool(SITE_MAP, Isolation.NONE), TASKS)
        first = fleet.start(0)
        for n in (1, 2):
            change(first, 0, "writer", f"/edit/{n}")
        async with fleet.client() as http:
            await leases.gather(fleet.link(http), fleet.workers)
            await leases.gather(fleet.link(http), fleet.workers)  # nothing new: nothing taken again
            assert taken(leases.pool, 0) == [f"{URLS[0]}/edit/1", f"{URLS[0]}/edit/2"]
            epoch, seen = leases.cursors[0]
            assert (epoch, seen) == (first.epoch, 2)
            change(first, 0, "writer", "/edit/3")
            await leases.gather(fleet.link(http), fleet.workers)
            assert leases.cursors[0] == (first.epoch, 3)
        # The worker restarts between two gatherings: its new log numbers from 1 again, under a new epoch.
        # Its first four mutations (more than the cursor had seen) are all new: none skipped as seen.
        second = fleet.start(0)
        assert second.epoch != first.epoch
        for n in (4, 5, 6, 7):
            change(second, 1, "writer", f"/edit/{n}")
        async with fleet.client() as http:
            await leases.gather(fleet.link(http), fleet.workers)
            await leases.gather(fleet.link(http), fleet.workers)
        assert taken(leases.pool, 0) == [f"{URLS[0]}/edit/{n}" for n in (1, 2, 3)]
        assert taken(leases.pool, 1) == [f"{URLS[1]}/edit/{n}" for n in (4, 5, 6, 7)]
        assert leases.cursors[0] == (second.epoch, 4)

    asyncio.run(scenario())


def test_two_gatherings_at_once_take_each_mutation_once() -> None:
    async def scenario() -> None:
        fleet = Fleet(1)
        leases = FrontLeases(ReplicaPool(SITE_MAP, Isolation.NONE), TASKS)
        log = fleet.start(0)
        for n in range(5):
            change(log, 0, "writer", f"/edit/{n}")
        async with fleet.client() as http:  # a finish's gathering and the watch's, from one cursor
            await asyncio.gather(*(leases.gather(fleet.link(http), fleet.workers) for _ in range(3)))
        assert taken(leases.pool, 0) == [f"{URLS[0]}/edit/{n}" for n in range(5)]

    asyncio.run(scenario())


def test_a_silent_workers_sessions_keep_their_leases_an_answering_ones_idle_lease_ends() -> None:
    async def scenario() -> None:
        fleet = Fleet(2)
        pool = ReplicaPool(SITE_MAP, Isolation.NONE, lease_timeout=60)
        leases = FrontLeases(pool, TASKS)
        fleet.start(0)  # worker 1 never answers (nothing listens on its port)
        owners = {"on-0": fleet.workers[0], "on-1": fleet.workers[1]}
        for name in owners:
            await pool.lease(name, READ)
            pool.leases[name].touched = time.time() - 120  # idle past the timeout
        async with fleet.client() as http:
            await leases.gather(fleet.link(http), fleet.workers)
        assert leases.unanswered == {1} and leases.answered == {0}
        assert leases.expire(owners.get) == ["on-0"]
        assert "on-1" in pool.leases and "on-0" not in pool.leases
        # A worker the front did not even ask (restarting, or found silent) is not heard either.
        async with fleet.client() as http:
            await leases.gather(fleet.link(http), [fleet.workers[0]])
        assert leases.expire(owners.get) == [] and "on-1" in pool.leases
        # Once it answers (its session unused all along: it lists no use), its session's lease ends too.
        fleet.start(1)
        async with fleet.client() as http:
            await leases.gather(fleet.link(http), fleet.workers)
        assert leases.unanswered == set() and leases.expire(owners.get) == ["on-1"]

    asyncio.run(scenario())


def test_telling_a_worker_a_lease_ended_is_tried_again_until_it_hears(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(link_module, "TELL_PAUSE", 0.05)

    async def scenario() -> None:
        fleet = Fleet(1)
        worker = fleet.workers[0]
        async with fleet.client() as http:  # not started: every try meets a closed port
            assert await fleet.link(http).tell_lease_end(worker, "s", LeaseEnd(ended="timeout")) is False
        fleet.start(0)
        ctx = fleet.contexts[0]
        async with fleet.client() as http:
            started = await http.post(
                f"{worker.control_url}/sessions",
                json={"task_id": READ.task_id, "session": "s"},
                headers={LEASE_HEADER: json.dumps({"indexes": {"shopping": 1}})},
            )
            assert started.status_code == 200, started.text
            assert await fleet.link(http).tell_lease_end(worker, "s", LeaseEnd(ended="timeout")) is True
        session = ctx.sessions.get("s")
        assert session is not None
        lease = session.attempt.lease
        assert lease is not None and lease.ended_early == "timeout"

    asyncio.run(scenario())


def test_the_forwarded_finish_carries_the_interference_the_verdict_names() -> None:
    async def scenario() -> None:
        fleet = Fleet(2)
        pool = ReplicaPool(SITE_MAP, Isolation.NONE)
        leases = FrontLeases(pool, TASKS)
        fleet.start(0)
        other = fleet.start(1)
        headers, _ = await leases.before_start(
            "reader", StartSession(task_id=READ.task_id, session="reader"), {}
        )
        held = json.loads(headers[LEASE_HEADER])["indexes"]["shopping"]
        worker = fleet.workers[0]
        async with fleet.client() as http:
            started = await http.post(
                f"{worker.control_url}/sessions", json={"task_id": READ.task_id, "session": "reader"},
                headers=headers,
            )  # fmt: skip
            assert started.status_code == 200, started.text
            reader = fleet.contexts[0].sessions.get("reader")
            assert reader is not None  # the agent's one page, captured by its worker
            reader.append(NetworkEvent("GET", f"{URLS[held]}/", 200, started=time.time()))
            change(other, held, "writer", "/cart/add")  # on the reader's copy, captured by the other worker
            carried = await leases.interference_header(fleet.link(http), fleet.workers, "reader")
            expected = pool.interference_record("reader").listed(INTERFERENCE_LISTED).view()
            assert decode_interference(carried[INTERFERENCE_HEADER]) == expected and expected["exposed"]
            answer = {"task_type": "retrieve", "status": "success", "retrieved_data": ["x"]}
            # A header that holds no interference is a 400 that changes nothing.
            bad = await http.post(
                f"{worker.control_url}/sessions/reader/preview", json=answer,
                headers={INTERFERENCE_HEADER: "not-an-interference"},
            )  # fmt: skip
            assert bad.status_code == 400 and bad.json()["error"] == "bad_interference", bad.text
            previewed = await http.post(
                f"{worker.control_url}/sessions/reader/preview", json=answer, headers=carried
            )
            assert previewed.json()["interference"] == expected
            finished = await http.post(
                f"{worker.control_url}/sessions/reader/finish", json=answer, headers=carried
            )
            assert finished.status_code == 200, finished.text
            named: dict[str, Any] = finished.json()["interference"]
            assert named == expected and named["mutations"][0]["url"] == f"{URLS[held]}/cart/add"

    asyncio.run(scenario())


def test_without_a_site_map_the_front_tells_its_worker_no_lease_and_leaves_the_reset_to_it() -> None:
    """An empty pool (no site map) leases nothing: the worker is told no lease (it checks no request
    against one) and a start asking for a reset goes on to the worker as it came (its 409 says the
    task's sites have no reset endpoint); the front still keeps the session's empty lease, so an abandon,
    a loss and a lease timeout end it there."""

    async def scenario() -> None:
        leases = FrontLeases(ReplicaPool(SiteMap(), Isolation.NONE), TASKS)
        document = {"task_id": 1001, "session": "s", "reset": True}
        headers, forwarded = await leases.before_start("s", StartSession.model_validate(document), document)
        assert headers == {} and forwarded == document
        assert leases.told("s") == {}
        held = leases.authority.lease_of("s")
        assert held is not None and held.indexes == {} and held.ended is None

    asyncio.run(scenario())


def test_with_a_site_map_the_front_tells_its_worker_the_lease_and_resets_it_itself() -> None:
    async def scenario() -> None:
        leases = FrontLeases(ReplicaPool(SITE_MAP, Isolation.NONE), TASKS)
        document = {"task_id": 1001, "session": "s"}
        headers, forwarded = await leases.before_start("s", StartSession.model_validate(document), document)
        assert set(headers) == {LEASE_HEADER} and forwarded == document
        assert leases.told("s") == headers

    asyncio.run(scenario())
