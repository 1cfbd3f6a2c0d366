"""Container-like copies whose resets a test holds: a `ResetWay` of kind `recreate` (as the container
copies' `CopyReset`, `webarena_live.sites`) whose every bring-up and reset waits until the test releases
it, ok or failed, and a keeper that hands the pool those ways, a ceiling per site and the watch through
which a test tells it a copy was lost. It stands for the engine in tests of the pool's side of the
copies (when a copy is made new, which are spares, what a lost one does); tests/containers tests the
real engine.

The copies' URLs are one HTTP server on 127.0.0.1 that answers every GET 200 (`CopiesUp`): what the pool
probes after making a lost copy new."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.support.pool_loop import OnLoop
from webarena_live.evaluator import SiteMap, load_tasks
from webarena_live.replicas import Isolation, Lease, Mutation
from webarena_live.replicas import resetting as resetting_module
from webarena_live.replicas.build import build_pool
from webarena_live.replicas.pool import ReplicaPool
from webarena_live.replicas.state import ReplicaState
from webarena_live.replicas.ways import ResetOutcome

TASKS = load_tasks("demo")
READ, MUTATE = TASKS[1001], TASKS[1004]
SITE = "shopping"
LOST = "its container exited (137)"
SECONDS = 1.5
"""What every held call says it took (the counters' seconds add these up)."""


@dataclass
class Call:
    """One bring-up or reset the pool asked of a copy."""

    what: str
    """`bring_up` or `reset`."""
    number: int
    """Its place among the copy's calls, from 1."""
    future: asyncio.Future[str]
    released: str | None = None
    """How the test let it end (`ok`, `failed`); None while it is held."""


@dataclass
class HeldCopy:
    """The way one copy is made new, each call held until `release`."""

    site: str
    index: int
    url: str
    kind: str = "recreate"
    calls: list[Call] = field(default_factory=list)
    changes: int = 0
    """How often the pool said the copy took its first change since it was made new (`changed`)."""

    @property
    def pending(self) -> Call | None:
        """The call held now, if any."""
        last = self.calls[-1] if self.calls else None
        return last if last is not None and last.released is None else None

    async def reset(self, timeout: float) -> ResetOutcome:
        return await self._held("reset")

    async def bring_up(self) -> ResetOutcome | None:
        return await self._held("bring_up")

    def changed(self) -> None:
        self.changes += 1

    async def _held(self, what: str) -> ResetOutcome:
        # two calls at once on one copy would be two containers made under one name
        assert self.pending is None, f"copy {self.index}: a {what} while its {self.pending} runs"
        call = Call(what, len(self.calls) + 1, asyncio.get_running_loop().create_future())
        self.calls.append(call)
        how = await call.future
        detail = f"{what} {call.number}: " + ("made new" if how == "ok" else "the container did not come up")
        return ResetOutcome(self.site, None, how == "ok", SECONDS, detail)

    def release(self, how: str) -> Call:
        """Let the held call end (`ok` or `failed`); call it on the pool's loop."""
        call = self.pending
        assert call is not None, f"copy {self.index} has no call held"
        call.released = how
        call.future.set_result(how)
        return call


class HeldKeeper:
    """The pool's keeper of the held copies (`replicas.resetting.CopyKeeper`): their ways, the ceilings,
    and `lost`, the pool's own callback its `watch` was handed."""

    def __init__(self, ways: Mapping[tuple[str, int], HeldCopy], ceilings: Mapping[str, int]) -> None:
        self.ways = dict(ways)
        self.ceilings = dict(ceilings)
        self.lost: Callable[[str, int, str], None] | None = None
        self.closed = False

    def problems(self) -> list[str]:
        return []  # its engine is the test: always there

    def describe(self) -> str:
        return f"{len(self.ways)} held copies"

    async def watch(self, lost: Callable[[str, int, str], None]) -> None:
        self.lost = lost
        await asyncio.Event().wait()  # until the pool closes (cancelled)

    async def close(self) -> None:
        self.closed = True


class _Up(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"up")

    def log_message(self, format: str, *args: Any) -> None:
        return None


class CopiesUp:
    """One HTTP server on 127.0.0.1 answering 200: the copies' URLs, `url(i)`."""

    def __init__(self) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _Up)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, args=(0.01,), daemon=True).start()

    def url(self, index: int) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/copy-{index}/"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def copies_map(up: CopiesUp, count: int, site: str = "__SHOPPING__") -> SiteMap:
    """A site of `count` copies with no reset endpoint: they are made new by their ways alone."""
    replicas = [{"urls": [up.url(i)]} for i in range(count)]
    return SiteMap.from_config({"environments": {site: {"replicas": replicas}}}, source="held copies")


def held_ways(site_map: SiteMap, site: str = "shopping") -> dict[tuple[str, int], HeldCopy]:
    replicas = site_map.environments[site].replicas
    return {(site, i): HeldCopy(site, i, r.url) for i, r in enumerate(replicas)}


async def settled(pool: ReplicaPool, ways: Mapping[tuple[str, int], HeldCopy], seconds: float = 10.0) -> None:
    """Until every reset the pool runs waits on its held call (or it finished): what the pool does next
    is then only what the test releases. The probe after a lost copy was made new is real HTTP, so this
    waits on the state, not on a number of loop turns."""
    deadline = time.monotonic() + seconds
    while any(
        r.resetting and ways[(r.site, r.index)].pending is None for rs in pool.replicas.values() for r in rs
    ):
        assert time.monotonic() < deadline, pool.status()
        await asyncio.sleep(0.001)
    await asyncio.sleep(0)  # the wake-ups the last end spawned


def in_flight(count: int) -> str:
    """How a refusal names the resets a start waits for."""
    return f"{count} reset{'s' if count > 1 else ''} in flight: the wait is the first to finish"


class Copies(OnLoop):
    """A pool over `replicas` + `spares` held copies of one site (the spares beyond its ceiling), on an
    event loop of its own, each call made on it as `serve` makes it; every call returns once the pool's
    resets wait on their held calls (`settled`). A failed reset is retried after `probe_pause`: made no
    pause here, so the retry is held at once and the test, not the clock, says when it ends."""

    def __init__(
        self, replicas: int, spares: int, isolation: Isolation | None, *, built: bool = False
    ) -> None:
        self.loop = asyncio.new_event_loop()
        self.pause = resetting_module.probe_pause
        resetting_module.probe_pause = lambda attempt: 0.0
        self.up = CopiesUp()
        self.site_map = copies_map(self.up, replicas + spares)
        self.ways = held_ways(self.site_map)
        self.keeper = HeldKeeper(self.ways, {SITE: replicas})
        if built:  # the way `serve` builds it (None: the policy a map of copies gets)
            self.pool = build_pool(self.site_map, isolation, None, keeper=self.keeper)
        else:  # the same pool, without `build_pool`'s look at reset endpoints (there are none)
            self.pool = ReplicaPool(
                self.site_map,
                isolation,
                ways=self.keeper.ways,
                ceilings=self.keeper.ceilings,
                keeper=self.keeper,
            )
        self.within(self.pool.start)
        self.settle()

    @property
    def replicas(self) -> list[ReplicaState]:
        return self.pool.replicas[SITE]

    def settle(self) -> None:
        self.run(settled(self.pool, self.ways))

    def lease(self, session: str, mutating: bool, wait: float = 0.0) -> Lease:
        return self.run(self.pool.lease(session, MUTATE if mutating else READ, wait=wait))

    def take(self, session: str, index: int) -> None:
        url = f"{self.replicas[index].url}checkout/cart/add/"
        self.within(lambda: self.pool.take(SITE, index, Mutation(session, "POST", url, time.time())))
        self.settle()

    def end(self, session: str, reason: str = "finished") -> Lease | None:
        lease = self.within(lambda: self.pool.end_lease(session, reason))
        self.settle()
        return lease

    def lose(self, index: int) -> None:
        assert self.keeper.lost is not None, "the pool did not watch its keeper"
        lost = self.keeper.lost
        self.within(lambda: lost(SITE, index, LOST))
        self.settle()

    def release(self, index: int, how: str = "ok") -> Call:
        call = self.within(lambda: self.ways[(SITE, index)].release(how))
        self.settle()
        return call

    def close(self) -> None:
        self.run(self.pool.close())
        self.loop.close()
        self.up.close()
        resetting_module.probe_pause = self.pause
