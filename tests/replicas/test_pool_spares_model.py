"""A model of the replica pool over container copies with spares (`replicas/pool.py`, `resetting.py`),
checked: Hypothesis draws a site of R copies held at once plus K spares, under `readers` or `exclusive`,
and drives the pool through random sequences (starts of readers and mutating sessions, their mutations,
late ones included, finish, abandon, a copy lost, one held bring-up or reset let end, ok or failed);
after every step it checks the pool against what the model expects. The copies' ways are held
(`tests/support/held_copies.py`: kind `recreate`, each call waits for the sequence), so when a copy is
back is a step of the sequence and a sequence replays the same.

What is checked: never more than R copies with holders; no copy granted while it is resetting, out of
service, failing, changed, or lost and not made new since; a start refused only when no copy fitted under
the policy and the ceiling (the model's own count), its detail naming the copies in use when the ceiling
refused it and the resets in flight; a reader joins readers when it can; the pool's state of each copy
(resetting, changed, out of service, failing) and which calls it made (one per expected bring-up, reset
or retry, never two at once, a bring-up first) equal the model's; a changed or lost copy nobody holds has
its reset held; the counters (resets, failed, skipped, seconds) equal what the sequence released, bring-
ups not counted. `--hypothesis-show-statistics` tells how often the telling cases came up (`event`)."""

from __future__ import annotations

import pytest
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from tests.support.held_copies import LOST, SECONDS, SITE, Copies, in_flight
from webarena_live.replicas import Isolation, NoReplica
from webarena_live.replicas.pool import ReplicaPool

SESSIONS = ("a", "b", "c", "d", "e")


class SparesMachine(RuleBasedStateMachine):
    """The pool over R copies plus K spares, and what the model expects of it."""

    def __init__(self) -> None:
        super().__init__()
        self.c: Copies | None = None
        self.ceiling = 0
        self.isolation = Isolation.EXCLUSIVE
        self.holders: list[dict[str, bool]] = []
        """Per copy, its holders as the model expects: session -> whether its task mutates."""
        self.where: dict[str, int] = {}
        """The copy each session holds now."""
        self.last: dict[str, int] = {}
        """The copy each session was last granted (where its late mutation lands)."""
        self.resetting: list[bool] = []
        self.calls: list[int] = []
        """Per copy, how many bring-ups and resets the pool should have asked of its way so far."""
        self.due: list[int] = []
        """Per copy, the call whose success makes it clean again: the first begun after its last change."""
        self.made: list[int] = []
        """Per copy, its last call that succeeded."""
        self.lost: list[bool] = []
        """Lost, and no call of its way succeeded since."""
        self.told: list[bool] = []
        """Failing in the pool's eyes (lost while no reset ran)."""
        self.out: list[bool] = []
        self.changes: list[int] = []
        self.resets = self.failed = self.skipped = 0
        self.seconds = 0.0

    @property
    def p(self) -> ReplicaPool:
        assert self.c is not None
        return self.c.pool

    def dirty(self, index: int) -> bool:
        return self.due[index] > self.made[index]

    def fitting(self, mutating: bool) -> tuple[list[int], list[int]]:
        """The copies a start may be granted (the policy, then the ceiling), and those the policy alone
        allows: the model's own count, from its holders and what the sequence released."""
        allowed = []
        for i, holders in enumerate(self.holders):
            if self.resetting[i] or self.lost[i] or self.dirty(i):
                continue
            if self.isolation is Isolation.EXCLUSIVE or mutating:
                if not holders:
                    allowed.append(i)
            elif not any(holders.values()):
                allowed.append(i)
        in_use = sum(1 for holders in self.holders if holders)
        fitting = [i for i in allowed if self.holders[i]] if in_use >= self.ceiling else allowed
        return fitting, allowed

    def leave(self, session: str) -> None:
        """The model's side of an end: a copy its last holder left is made new when it changed or was
        lost, else back at once (a skipped reset)."""
        index = self.where.pop(session, None)
        if index is None:
            return
        del self.holders[index][session]
        if self.holders[index]:
            return
        if self.told[index] or self.dirty(index):
            self.begin_reset(index)
        else:
            self.skipped += 1

    def begin_reset(self, index: int) -> None:
        self.resetting[index] = True
        self.calls[index] += 1

    # --- rules --------------------------------------------------------------------------------------

    @initialize(
        replicas=st.sampled_from([1, 2, 3]),
        spares=st.sampled_from([0, 1, 2]),
        isolation=st.sampled_from([Isolation.READERS, Isolation.EXCLUSIVE]),
        up=st.lists(st.booleans(), min_size=5, max_size=5),
    )
    def begin(self, replicas: int, spares: int, isolation: Isolation, up: list[bool]) -> None:
        """The pool starts: every copy is brought up (made or adopted) before its first lease; those
        `up` names are brought up at once, the others are left to the sequence."""
        count = replicas + spares
        self.ceiling, self.isolation = replicas, isolation
        self.holders = [{} for _ in range(count)]
        self.resetting, self.calls = [True] * count, [1] * count
        self.due, self.made, self.changes = [0] * count, [0] * count, [0] * count
        self.lost, self.told, self.out = [False] * count, [False] * count, [False] * count
        self.c = Copies(replicas, spares, isolation)
        for index in range(count):
            if up[index]:
                self.finish(index, ok=True)

    @rule(session=st.sampled_from(SESSIONS), mutating=st.booleans())
    def start(self, session: str, mutating: bool) -> None:
        """A new start (wait 0): the session's own lease ends first; refused only when nothing fits."""
        self.start_of(session, mutating)

    @precondition(lambda self: len(self.where) < len(SESSIONS))
    @rule(data=st.data(), mutating=st.booleans())
    def start_another(self, data: st.DataObject, mutating: bool) -> None:
        """A start of a session that holds nothing: one more copy in use, up to the ceiling."""
        self.start_of(data.draw(st.sampled_from([s for s in SESSIONS if s not in self.where])), mutating)

    def start_of(self, session: str, mutating: bool) -> None:
        assert self.c is not None
        self.leave(session)
        fitting, allowed = self.fitting(mutating)
        if not mutating and any(h and self.dirty(i) for i, h in enumerate(self.holders)):
            event("a reader starts while a held copy is changed")  # it must not join its readers
        try:
            lease = self.c.lease(session, mutating)
        except NoReplica as refusal:
            assert not fitting, f"refused while {fitting} fit: {refusal.detail}"
            detail = str(refusal.detail)
            if allowed:  # the policy allowed a spare: the ceiling refused it
                event("refused by the ceiling")
                in_use = sum(1 for holders in self.holders if holders)
                assert f"{in_use} of {self.ceiling} copies in use" in detail, detail
            if any(self.resetting):
                assert in_flight(sum(self.resetting)) in detail, detail
            self.c.settle()
            return
        index = lease.indexes[SITE]
        replica = self.c.replicas[index]
        assert index in fitting, (index, fitting, self.p.status())
        assert replica.leasable and not replica.dirty, replica.view()
        assert self.c.ways[(SITE, index)].pending is None, "granted while being made new"
        assert not self.lost[index], "a lost copy granted before it was made new"
        if any(self.resetting):
            event("granted while another copy is made new")
        if replica.resets and replica.resets[-1]["why"] == f"failing: {LOST}":
            event("granted a lost copy made new")
        shared = [i for i in fitting if self.holders[i]]
        if self.isolation is Isolation.READERS and not mutating and shared:
            assert index in shared, f"a reader took copy {index} while {shared} had readers to join"
        self.holders[index][session] = mutating
        self.where[session] = self.last[session] = index
        self.c.settle()

    @precondition(lambda self: self.last)
    @rule(data=st.data())
    def mutate(self, data: st.DataObject) -> None:
        """A mutation through a session's address: on the copy it holds (a reader's POST counts as much
        as a writer's: then no other reader joins that copy), or told late, after its lease ended,
        maybe while its copy is being made new (then the call held now does not make it clean); the
        holders, and the late ones on a copy being made new, drawn more often than the rest."""
        anyone = sorted(self.last)
        late = [s for s in anyone if s not in self.where and self.resetting[self.last[s]]]
        self.mutation(data.draw(st.sampled_from(anyone + (late + sorted(self.where)) * len(anyone))))

    def mutation(self, session: str) -> None:
        assert self.c is not None
        index = self.last[session]
        if not self.dirty(index):
            self.changes[index] += 1
        self.due[index] = self.calls[index] + 1  # a call begun from now on
        if not self.holders[index] and not self.resetting[index]:
            self.begin_reset(index)  # changed after its lease ended: no release resets it
        self.c.take(session, index)

    @precondition(lambda self: self.where)
    @rule(data=st.data(), reason=st.sampled_from(["finished", "abandoned"]))
    def end(self, data: st.DataObject, reason: str) -> None:
        assert self.c is not None
        session = data.draw(st.sampled_from(sorted(self.where)))
        self.leave(session)
        lease = self.c.end(session, reason)
        assert lease is not None and lease.ended == reason, lease

    @rule(data=st.data())
    def lose(self, data: st.DataObject) -> None:
        """A copy's container died (its keeper's watch says so): failing, made new once nobody holds
        it; a copy being made new already is left to that call."""
        assert self.c is not None
        index = data.draw(st.integers(0, len(self.holders) - 1))
        self.lost[index] = True
        if not self.resetting[index]:
            self.told[index] = True
            if not self.holders[index]:
                self.begin_reset(index)
        self.c.lose(index)

    @precondition(lambda self: any(self.resetting))
    @rule(data=st.data(), ok=st.sampled_from([True, True, False]))
    def release(self, data: st.DataObject, ok: bool) -> None:
        """One held bring-up or reset ends: a success brings the copy back (made new again first when
        it changed meanwhile), a failure takes it out of service and is retried (one in three fails:
        enough to see it, few enough that copies come back)."""
        self.finish(data.draw(st.sampled_from([i for i, r in enumerate(self.resetting) if r])), ok=ok)

    def finish(self, index: int, *, ok: bool) -> None:
        assert self.c is not None
        call = self.c.ways[(SITE, index)].pending
        assert call is not None and call.number == self.calls[index], (call, self.calls[index])
        event(f"a {call.what} {'succeeded' if ok else 'failed'}")
        if call.what == "reset":
            self.seconds += SECONDS
            self.resets += ok
            self.failed += not ok
        if not ok:
            self.out[index] = True
            self.calls[index] += 1  # retried
        else:
            self.made[index] = call.number
            self.lost[index] = False
            if self.dirty(index):  # changed while it ran: made new again
                event("changed while made new: made new again")
                self.calls[index] += 1
            else:
                self.resetting[index] = self.out[index] = self.told[index] = False
        self.c.release(index, "ok" if ok else "failed")

    # --- invariants ---------------------------------------------------------------------------------

    @invariant()
    def at_most_the_ceiling_held(self) -> None:
        if self.c is None:
            return
        held = sum(1 for r in self.c.replicas if r.holders)
        assert held <= self.ceiling, self.p.status()
        assert [r.holders for r in self.c.replicas] == self.holders, "holders and the model differ"
        assert set(self.p.leases) == set(self.where)

    @invariant()
    def each_copy_as_the_model_says(self) -> None:
        if self.c is None:
            return
        for i, replica in enumerate(self.c.replicas):
            way = self.c.ways[(SITE, i)]
            seen = (replica.resetting, replica.dirty, bool(replica.out_of_service), bool(replica.failing))
            expected = (self.resetting[i], self.dirty(i), self.out[i], self.told[i])
            assert seen == expected, (i, seen, expected, replica.view())
            assert (way.pending is not None) == self.resetting[i], (i, way.calls)
            assert len(way.calls) == self.calls[i], (i, way.calls, self.calls[i])
            assert way.calls[0].what == "bring_up", way.calls
            after_success = [c for j, c in enumerate(way.calls[1:]) if way.calls[j].released == "ok"]
            assert all(c.what == "reset" for c in after_success), way.calls
            assert way.changes == self.changes[i], (i, way.changes, self.changes[i])
            if not replica.holders and (replica.dirty or replica.failing or self.lost[i]):
                assert replica.resetting and way.pending is not None, f"copy {i} left changed or lost"

    @invariant()
    def counters_in_step(self) -> None:
        if self.c is None:
            return
        counters = self.p.counters[SITE]
        seen = (counters.resets, counters.failed, counters.skipped)
        assert seen == (self.resets, self.failed, self.skipped), (seen, self.p.counters_view())
        assert counters.seconds == pytest.approx(self.seconds)

    def teardown(self) -> None:
        if self.c is not None:
            self.c.close()


TestSpares = SparesMachine.TestCase
# Derandomized (the same sequences every run, as the other pool model) and sized for the quick suite.
TestSpares.settings = settings(
    max_examples=75, stateful_step_count=35, deadline=None, database=None, derandomize=True
)
