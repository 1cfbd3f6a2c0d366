"""The pool over container copies with spares (`replicas/pool.py`, `resetting.py`), by example: a spare
taken at once while a changed copy is made new, a start refused (and one that waits) while the only
copy is made new, a lost copy. The copies' ways are held until the test lets them end
(`tests/support/held_copies.py`); `test_pool_spares_model.py` checks the same rules over random
sequences."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.support.held_copies import LOST, MUTATE, SITE, Copies, in_flight
from webarena_live.replicas import Isolation, NoReplica

Make = Callable[..., Copies]


@pytest.fixture
def copies() -> Iterator[Make]:
    made: list[Copies] = []

    def make(replicas: int, spares: int, isolation: Isolation | None = None, **options: bool) -> Copies:
        made.append(Copies(replicas, spares, isolation, **options))
        return made[-1]

    yield make
    for one in made:
        one.close()


def refusal(c: Copies, session: str, mutating: bool) -> str:
    with pytest.raises(NoReplica) as refused:
        c.lease(session, mutating)
    return str(refused.value.detail)


def test_with_a_spare_the_next_writer_gets_it_at_once_while_the_first_copy_is_made_new(copies: Make) -> None:
    c = copies(1, 1, built=True)  # as `serve` builds it: a map of copies is shared by readers
    assert c.pool.isolation is Isolation.READERS and c.pool.ceilings == {SITE: 1}
    assert [w.pending.what for w in c.ways.values() if w.pending] == ["bring_up", "bring_up"]
    assert in_flight(2) in refusal(c, "a", True), "leased before it was brought up"
    c.release(0)
    c.release(1)
    assert c.lease("a", True).indexes == {SITE: 0}
    c.take("a", 0)
    c.end("a")
    assert c.ways[(SITE, 0)].pending is not None and c.ways[(SITE, 0)].pending.what == "reset"
    assert c.lease("b", True).indexes == {SITE: 1}, "the spare was not granted at once"
    detail = refusal(c, "c", True)
    assert "1 of 1 copies in use, the others spares" in detail, detail
    assert "replica 0 resetting (a new container" in detail and in_flight(1) in detail, detail
    c.release(0)
    assert c.pool.counters[SITE].resets == 1 and not c.replicas[0].dirty
    detail = refusal(c, "c", True)  # copy 0 is new again, but one copy is all that may be held
    assert "1 of 1 copies in use" in detail and "replica 0 free" in detail and "in flight" not in detail
    c.end("b")  # it changed nothing: back at once, no reset
    assert c.pool.counters[SITE].skipped == 1 and c.ways[(SITE, 1)].pending is None
    assert c.lease("c", True).indexes == {SITE: 0}
    assert [call.what for call in c.ways[(SITE, 0)].calls] == ["bring_up", "reset"]
    assert [call.what for call in c.ways[(SITE, 1)].calls] == ["bring_up"]


def test_without_a_spare_a_writer_is_refused_naming_the_reset_it_waits_for(copies: Make) -> None:
    c = copies(1, 0, Isolation.EXCLUSIVE)
    c.release(0)
    c.lease("a", True)
    c.take("a", 0)
    assert c.ways[(SITE, 0)].changes == 1
    # a new start of `a` gives its changed copy up first: the reset that begins is what it waits for
    detail = refusal(c, "a", True)
    assert "replica 0 resetting (a new container" in detail and in_flight(1) in detail, detail
    assert "0 of 1 copies in use" in detail, detail
    waiting = c.loop.create_task(c.pool.lease("b", MUTATE, wait=5))
    c.settle()
    assert not waiting.done() and c.pool.waiting == 1
    c.release(0, "failed")  # out of service, tried again at once
    assert c.replicas[0].out_of_service and c.ways[(SITE, 0)].pending is not None
    assert "replica 0 out of service" in refusal(c, "c", False)
    c.release(0)
    lease = c.run(waiting)
    assert lease.indexes == {SITE: 0} and not c.replicas[0].dirty
    counters = c.pool.counters[SITE]
    assert (counters.resets, counters.failed) == (1, 1)


def test_a_lost_copy_is_failing_for_its_readers_and_made_new_once_they_leave(copies: Make) -> None:
    c = copies(2, 0, Isolation.READERS)
    c.release(0)
    c.release(1)
    assert c.lease("a", False).indexes == c.lease("b", False).indexes == {SITE: 0}  # readers pack
    c.lose(0)
    assert c.replicas[0].failing == LOST and c.ways[(SITE, 0)].pending is None  # its readers keep it
    assert c.lease("c", False).indexes == {SITE: 1}, "a reader joined a lost copy"
    c.end("a")
    assert c.ways[(SITE, 0)].pending is None
    c.end("b", "abandoned")
    assert c.ways[(SITE, 0)].pending is not None and c.ways[(SITE, 0)].pending.what == "reset"
    assert "replica 0 resetting" in refusal(c, "d", True)
    c.release(0)  # made new, then probed (it was failing): back
    assert c.replicas[0].failing is None and not c.replicas[0].resetting
    assert c.lease("d", True).indexes == {SITE: 0}
    assert c.pool.counters[SITE].resets == 1 and c.pool.counters[SITE].skipped == 0
