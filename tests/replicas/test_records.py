"""A lease's typed records (`replicas/records.py`): the lease book writes and reads `LeaseRecord` on a real
folder, a record the last release wrote (`Lease.record()`, before the records were typed) loads and is
written again byte for byte, a damaged one is skipped naming what is wrong, and `Interference`'s JSON is
the dict the finish reported before it was typed."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from pydantic import ValidationError

from webarena_live.replicas import EndReason, Interference, Lease, LeaseEnd, LeaseRecord, Mutation
from webarena_live.replicas.lease_book import BOOK_DIR, LeaseBook

SHOP_B = "http://shop-b.test:7772"

HELD_BEFORE = """{
  "session": "s/1",
  "task_id": 1001,
  "mutating": true,
  "indexes": {
    "shopping": 1
  },
  "replicas": {
    "__SHOPPING__": "http://shop-b.test:7772"
  },
  "started": 1764633600.25
}
"""
"""A held lease's file as the last release's lease book wrote it (`json.dumps(lease.record(), indent=2)`)."""

ENDED_BEFORE = """{
  "session": "t",
  "task_id": null,
  "mutating": false,
  "indexes": {
    "shopping": 0
  },
  "replicas": {
    "__SHOPPING__": "u"
  },
  "started": 5.0,
  "ended": "abandoned",
  "ended_reason": "gave up",
  "ended_at": 7.0
}
"""
"""An ended one's, with the end's reason under its book name (`ended_reason`)."""


def book(tmp_path: Path) -> LeaseBook:
    return LeaseBook(tmp_path / BOOK_DIR)


def test_the_book_keeps_a_lease_record_and_reads_it_back_as_it_was(tmp_path: Path) -> None:
    held = Lease({"shopping": 1}, {"__SHOPPING__": SHOP_B}, session="a b/c", task_id=7, mutating=True)
    ended = Lease({"shopping": 0}, {"__SHOPPING__": "u"}, session="gone", task_id=8)
    ended.copy_end(EndReason.TIMEOUT, None)
    writer = book(tmp_path)
    writer.write(held)
    writer.write(ended)
    found = book(tmp_path).all()  # a restart: a new book on the same folder
    assert {s: LeaseRecord.of(lease) for s, lease in found.items()} == {
        "a b/c": LeaseRecord.of(held),
        "gone": LeaseRecord.of(ended),
    }
    again = found["gone"]
    assert (again.ended, again.ended_detail, again.ended_at) == (EndReason.TIMEOUT, None, ended.ended_at)
    assert found["a b/c"].touched == held.started  # its idle time counts from its start
    assert LeaseRecord.of(held).end is None and LeaseRecord.of(ended).end == LeaseEnd.of(ended)


@pytest.mark.parametrize(("name", "written"), [("s/1", HELD_BEFORE), ("t", ENDED_BEFORE)])
def test_a_record_the_last_release_wrote_loads_and_is_written_again_byte_for_byte(
    tmp_path: Path, name: str, written: str
) -> None:
    folder = tmp_path / BOOK_DIR
    folder.mkdir()
    path = folder / f"{name.replace('/', '%2F')}.json"
    path.write_text(written, encoding="utf-8")
    lease = book(tmp_path).all()[name]
    if name == "t":
        assert (lease.ended, lease.ended_detail, lease.ended_at) == ("abandoned", "gave up", 7.0)
        assert lease.ended_early == EndReason.ABANDONED
    else:
        assert (lease.indexes, lease.replicas) == ({"shopping": 1}, {"__SHOPPING__": SHOP_B})
        assert (lease.task_id, lease.mutating, lease.started, lease.ended) == (
            1001,
            True,
            1764633600.25,
            None,
        )
    path.unlink()
    book(tmp_path).write(lease)
    assert path.read_text(encoding="utf-8") == written


def test_a_record_of_the_first_books_with_its_replicas_alone_loads_under_its_file_name(
    tmp_path: Path,
) -> None:
    folder = tmp_path / BOOK_DIR
    folder.mkdir()
    (folder / "old.json").write_text('{"indexes": {"shopping": 1}, "replicas": {"__SHOPPING__": "u"}}')
    lease = book(tmp_path).all()["old"]
    assert lease.indexes == {"shopping": 1} and lease.ended is None and lease.task_id is None


@pytest.mark.parametrize(
    ("damage", "named"),
    [
        ('{"session": "x", "indexes": {"shopping": 0}, "ended": "exploded"}', "ended"),
        ('{"session": "x", "indexes": {"shopping": "zero"}}', "indexes.shopping"),
        ('{"session": "x"}', "indexes"),
        ('{"session": "x", "indexes": {}, "colour": "red"}', "colour"),
        ("[1, 2]", "record"),
        ('{"session": "x", "ind', "Invalid JSON"),
    ],
)
def test_a_damaged_record_is_skipped_naming_what_is_wrong_and_the_others_load(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: str, named: str
) -> None:
    writer = book(tmp_path)
    writer.write(Lease({"shopping": 1}, {"__SHOPPING__": SHOP_B}, session="fine"))
    (tmp_path / BOOK_DIR / "x.json").write_text(damage, encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="webarena_live.replicas"):
        assert set(book(tmp_path).all()) == {"fine"}
    (warning,) = [r.getMessage() for r in caplog.records if "cannot be read" in r.getMessage()]
    assert "x.json" in warning and named in warning and "\n" not in warning, warning


# --- the interference ------------------------------------------------------------------------------

MUTATIONS = [Mutation("writer", "POST", f"{SHOP_B}/cart/{i}", 100.0 + i) for i in range(5)]
REPLICAS = {"__SHOPPING__": SHOP_B}


def old_view(mutation: Mutation) -> dict[str, object]:
    return {
        "session": mutation.session,
        "method": mutation.method,
        "url": mutation.url,
        "time": mutation.time,
    }


def test_the_interference_of_a_session_nobody_interfered_with_is_the_old_shape() -> None:
    assert Interference.none().view() == {"exposed": False, "count": 0, "mutations": [], "replicas": {}}
    assert Interference.none(REPLICAS).view() == {
        "exposed": False, "count": 0, "mutations": [], "replicas": REPLICAS,
    }  # fmt: skip
    assert Interference.of([], REPLICAS) == Interference.none(REPLICAS)


def test_a_listed_interference_is_the_dict_the_finish_reported_before() -> None:
    """What `control/authority.py`'s `listed` made of the pool's dict: every mutation counted, the first
    ones listed."""
    views = [old_view(m) for m in MUTATIONS]
    pool_dict = {"exposed": True, "mutations": views, "replicas": REPLICAS}
    before = {**pool_dict, "count": 5, "mutations": views[:2]}
    seen = Interference.of(MUTATIONS, REPLICAS)
    assert seen.listed(2).view() == before
    assert seen.listed(100).view() == {**pool_dict, "count": 5}
    assert seen.listed(2).count == 5 and len(seen.listed(2).mutations) == 2


def test_a_fleets_interference_names_the_workers_that_did_not_answer_as_it_did() -> None:
    """The front's dict, `unanswered_workers` added to the listed one (as `fleet/front/leases.py` does)."""
    seen = Interference.of(MUTATIONS[:1], REPLICAS).listed(100)
    before = {"exposed": True, "count": 1, "mutations": [old_view(MUTATIONS[0])], "replicas": REPLICAS}
    assert seen.unanswered([3, 1]).view() == {**before, "unanswered_workers": [1, 3]}
    assert seen.unanswered([]).view() == before  # every worker answered: no key
    assert Interference.model_validate({**before, "unanswered_workers": [1, 3]}) == seen.unanswered([1, 3])


@pytest.mark.parametrize(
    "document",
    [
        {"exposed": True, "count": 1, "mutations": [], "replicas": {}, "more": 1},  # a key it does not know
        {"exposed": True, "count": 0, "mutations": [], "replicas": {}},  # exposed to nothing
        {"exposed": False, "count": 2, "mutations": [], "replicas": {}},  # two changes, not exposed
        {"exposed": True, "count": 1, "mutations": [old_view(m) for m in MUTATIONS[:2]]},  # more listed
        {"exposed": True, "count": 1, "mutations": [{"session": "w", "method": "POST"}]},  # half a mutation
        {"exposed": "yes", "count": 1},
        {"exposed": False},  # no count: the one shape has it
    ],
)
def test_an_interference_that_does_not_add_up_is_refused(document: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        Interference.model_validate(document)


def test_a_mutation_told_without_its_time_is_listed_as_it_was_told() -> None:
    """A front's interference as the wire took it before it was typed: a mutation without `time`."""
    told = {"exposed": True, "count": 1, "mutations": [{"session": "o", "method": "POST", "url": SHOP_B}]}
    assert Interference.model_validate(told).view() == {**told, "replicas": {}}
