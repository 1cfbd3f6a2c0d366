"""The wire between a fleet's front and its workers (`control/wire.py`) on the lease's typed records: the
lease header and the lease end are the JSON they were before the records were typed, a header that holds
no lease is a 400 saying what is wrong, and the interference header carries `Interference`'s JSON both
ways."""

from __future__ import annotations

import base64
import json
import zlib

import pytest

from webarena_live.control.errors import ControlError
from webarena_live.control.wire import (
    LeaseEnd,
    decode_interference,
    encode_interference,
    encode_lease,
    lease_view,
    read_interference,
)
from webarena_live.evaluator import SiteMap
from webarena_live.replicas import EndReason, Interference, Lease, Mutation

URLS = ("http://shop-a.test:7771", "http://shop-b.test:7772")
SITE_MAP = SiteMap.from_config(
    {"environments": {"__SHOPPING__": {"replicas": [{"urls": [url]} for url in URLS]}}}, source="test"
)


def leased(index: int = 1) -> Lease:
    return Lease({"shopping": index}, {"__SHOPPING__": URLS[index]}, session="s", task_id=1001, started=5.0)


def test_the_lease_header_is_the_json_it_was() -> None:
    """`LeaseGrant(...).model_dump_json(exclude_none=True)`, as the front wrote it before."""
    lease = leased()
    assert encode_lease(lease) == '{"indexes":{"shopping":1}}'
    lease.copy_end(EndReason.ABANDONED, "gave up", 7.5)
    assert (
        encode_lease(lease)
        == '{"indexes":{"shopping":1},"ended":"abandoned","reason":"gave up","ended_at":7.5}'
    )
    lease = leased()
    lease.copy_end(EndReason.TIMEOUT, None, 8.0)
    assert encode_lease(lease) == '{"indexes":{"shopping":1},"ended":"timeout","ended_at":8.0}'


def test_the_worker_reads_the_lease_its_front_told_ended_as_it_ended() -> None:
    told = leased()
    told.copy_end(EndReason.TIMEOUT, "idle", 8.0)
    view = lease_view(encode_lease(told), SITE_MAP, "s")
    assert (view.indexes, view.replicas, view.session) == ({"shopping": 1}, {"__SHOPPING__": URLS[1]}, "s")
    assert (view.ended, view.ended_detail, view.ended_at) == (EndReason.TIMEOUT, "idle", 8.0)
    held = lease_view('{"indexes": {"shopping": 0}}', SITE_MAP, "t")  # what a test front sends
    assert held.replicas == {"__SHOPPING__": URLS[0]} and held.ended is None


@pytest.mark.parametrize(
    ("header", "named"),
    [
        ("not json", "Invalid JSON"),
        ('{"indexes": {"shopping": "one"}}', "indexes.shopping"),
        ('{"indexes": {"shopping": 1}, "ended": "exploded"}', "ended"),
        ('{"indexes": {"shopping": 1}, "reason": 3}', "reason"),
        ('{"replicas": {"__SHOPPING__": "x"}}', "indexes"),
        ('{"indexes": {"shopping": 1}, "colour": "red"}', "colour"),
        ("[]", "body"),
        ('{"indexes": {"shopping": 2}}', "names no replica here"),
        ('{"indexes": {"wiki": 0}}', "names no replica here"),
    ],
)
def test_a_lease_header_that_holds_no_lease_here_is_a_400_saying_what_is_wrong(
    header: str, named: str
) -> None:
    with pytest.raises(ControlError) as refused:
        lease_view(header, SITE_MAP, "s")
    assert refused.value.status == 400 and refused.value.error == "bad_lease"
    assert named in refused.value.detail and repr(header) in refused.value.detail, refused.value.detail


def test_a_lease_end_is_the_body_it_was_and_refuses_a_word_the_pool_does_not_know() -> None:
    lease = leased()
    lease.copy_end(EndReason.LOST, "worker 1 gone", 9.0)
    end = LeaseEnd.of(lease)
    assert end.model_dump(exclude_none=True) == {"ended": "lost", "reason": "worker 1 gone", "ended_at": 9.0}
    assert LeaseEnd.model_validate({"ended": "timeout"}).ended is EndReason.TIMEOUT
    with pytest.raises(ValueError):
        LeaseEnd.model_validate({"ended": "exploded"})
    with pytest.raises(ValueError):
        LeaseEnd.of(leased())  # not ended: no end to tell


def test_the_interference_header_carries_the_dict_and_the_model_alike() -> None:
    mutations = [Mutation("w", "POST", f"{URLS[1]}/cart/{i}", 10.0 + i) for i in range(3)]
    seen = Interference.of(mutations, {"__SHOPPING__": URLS[1]}).listed(2).unanswered([2])
    view = seen.view()
    assert view == {
        "exposed": True, "count": 3,
        "mutations": [{"session": "w", "method": "POST", "url": f"{URLS[1]}/cart/{i}", "time": 10.0 + i}
                      for i in range(2)],
        "replicas": {"__SHOPPING__": URLS[1]}, "unanswered_workers": [2],
    }  # fmt: skip
    for given in (seen, view):
        header = encode_interference(given)
        assert decode_interference(header) == view and read_interference(header) == seen
    header = encode_interference(Interference.none())
    assert json.dumps(decode_interference(header)) == json.dumps(
        {"exposed": False, "count": 0, "mutations": [], "replicas": {}}
    )  # the same keys in the same order


def packed(document: object) -> str:
    """A header as `encode_interference` packs one, of any document."""
    return base64.urlsafe_b64encode(zlib.compress(json.dumps(document).encode())).decode("ascii")


@pytest.mark.parametrize(
    "header",
    [
        "not-an-interference",
        encode_interference(Interference.none())[:-4],
        "w6s=",
        packed({"exposed": True, "count": 0, "mutations": [], "replicas": {}}),
        packed({"exposed": False, "count": 0, "mutations": "none"}),
        packed([1]),
    ],
)
def test_an_interference_header_that_holds_none_is_a_400(header: str) -> None:
    with pytest.raises(ControlError) as refused:
        decode_interference(header)
    assert refused.value.status == 400 and refused.value.error == "bad_interference"


def test_an_interference_that_does_not_add_up_is_not_sent() -> None:
    with pytest.raises(ValueError):
        encode_interference({"exposed": True, "count": 0, "mutations": [], "replicas": {}})
