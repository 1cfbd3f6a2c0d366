"""Placement, the pure part of workers: which worker and which port a session gets."""

from __future__ import annotations

import base64
import socket

import pytest

from webarena_live.addresses.placement import AddressesExhausted, Placement, PlacementError, PortRange
from webarena_live.fleet.front.router import head_username


def test_port_ranges_parse_or_say_what_is_wrong() -> None:
    assert list(PortRange.parse("20000-20002")) == [20000, 20001, 20002]
    assert len(PortRange.parse("9000")) == 1
    for bad in ("20000-", "a-b", "2-1", "0-10", "70000"):
        with pytest.raises(PlacementError, match="session ports"):
            PortRange.parse(bad)


def test_sessions_go_to_the_least_busy_worker_and_keep_it() -> None:
    placement = Placement(3, ports=PortRange(30000, 30099), is_free=lambda port: True)
    seats = {name: placement.place(name) for name in "abcdef"}
    assert [seats[name].worker for name in "abcdef"] == [0, 1, 2, 0, 1, 2]
    assert len({seat.port for seat in seats.values()}) == 6
    assert placement.place("a") == seats["a"]  # a restart keeps the seat
    assert placement.release("a") == seats["a"].port
    # The name keeps its worker after its finish; its port goes to the next session.
    assert placement.place("g").port == seats["a"].port
    assert placement.owner("a") == 0
    assert placement.place("a").worker == 0
    placement.down.add(1)
    assert placement.place("h").worker != 1


def test_counts_follow_finishes_and_lost_sessions() -> None:
    """The per-worker counts and held ports are kept as sessions come and go (not collected per start):
    after finishes and a lost session they match what is held."""
    placement = Placement(2, ports=PortRange(30000, 30099), is_free=lambda port: True)
    for index in range(10):
        placement.place(f"s{index}")
    for index in range(0, 10, 2):  # worker 0's sessions finish
        placement.release(f"s{index}")
    placement.forget("s1")  # one of worker 1's is lost
    assert placement.running_on(1) == ["s3", "s5", "s7", "s9"] and placement.running_on(0) == []
    assert [placement.place(f"n{index}").worker for index in range(5)] == [0, 0, 0, 0, 0]  # 4-4: the lower
    held = placement.held_ports()
    assert len(set(held.values())) == len(held) == 9  # freed ports reused, none handed out twice
    assert all(placement.port_of(name) == port for name, port in held.items())
    assert placement.port_of("s0") is None
    placement.release("s3")
    placement.release("s3")  # twice: counted once
    assert placement.place("n5").worker == 1


def test_ports_others_hold_are_skipped_and_a_full_range_is_refused() -> None:
    taken = {30001}
    placement = Placement(ports=PortRange(30000, 30002), is_free=lambda port: port not in taken,
                          reserved=frozenset({30000}))  # fmt: skip
    assert placement.place("a").port == 30002
    with pytest.raises(AddressesExhausted, match="30000-30002"):
        placement.place("b")
    assert placement.owner("b") is None  # nothing changed


def test_without_a_range_the_operating_system_picks_free_ports() -> None:
    placement = Placement()
    port = placement.place("a").port
    assert port is not None
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))  # it was free


def test_the_router_names_the_session_from_the_first_head() -> None:
    token = base64.b64encode(b"agent-3:pass:with:colons").decode()
    head = f"CONNECT a.test:443 HTTP/1.1\r\nHost: a.test:443\r\nProxy-Authorization: Basic {token}\r\n\r\n"
    assert head_username(head.encode()) == "agent-3"
    assert head_username(b"GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n") is None


def test_a_port_a_worker_found_busy_is_not_offered_to_it_again() -> None:
    """Under --ray the front cannot test a port of another machine: the worker's refusal is the test,
    and the next try must not land on the same busy port."""
    placement = Placement(2, ports=PortRange(30000, 30002), is_free=lambda port: True)
    first = placement.place("a", among=[1])
    placement.release("a")
    placement.mark_busy(1, first.port)
    again = placement.place("a", among=[1])
    assert again.worker == 1 and again.port != first.port
    placement.release("a")
    assert placement.place("b", among=[0]).port == first.port  # busy on worker 1's machine only
