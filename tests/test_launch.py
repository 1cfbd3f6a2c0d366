"""`free_ports`: the ports a launched `serve` gets are drawn below the kernel's ephemeral range, where no
outgoing connection can take one between the draw and the bind (webarena_live.launch)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from webarena_live import launch
from webarena_live.launch import free_ports


def test_ports_are_distinct_free_and_below_the_ephemeral_range() -> None:
    first_ephemeral = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    if first_ephemeral <= launch.QUIET_PORTS_FROM:
        pytest.skip(f"this kernel's ephemeral ports start at {first_ephemeral}: there is no quiet range")
    for _ in range(20):
        ports = free_ports(5)
        assert len(set(ports)) == 5
        assert all(launch.QUIET_PORTS_FROM <= port < first_ephemeral for port in ports), ports
        for port in ports:  # free now: each binds
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", port))


def test_a_taken_port_is_never_drawn_and_a_full_range_falls_back_to_the_kernel(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        taken = held.getsockname()[1]
        monkeypatch.setattr(launch, "_quiet_ports", lambda: range(taken, taken + 1))
        (port,) = free_ports(1)
        assert port != taken  # the one quiet port is in use: the kernel's choice, free
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))
