"""Listening sockets kept by a parent across its child's restarts (addresses/listeners.py), on real
sockets and a real child process: a connection made while no child runs waits in the backlog and is
accepted by the next child."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

from webarena_live.addresses.listeners import KeptListeners, ListenerKeeper

CHILD = """
import socket, sys, time
from webarena_live.addresses.listeners import kept_listeners
kept = kept_listeners()
port = int(sys.argv[1])
sock = kept.take(port)
if sock is None:
    sock = socket.create_server(("127.0.0.1", port))
    kept.hold(sock)
    print("opened", flush=True)
else:
    print("adopted", flush=True)
    sock.setblocking(True)
    connection, _ = sock.accept()
    connection.sendall(b"served by the second child")
    connection.close()
    kept.drop(port)
time.sleep(float(sys.argv[2]))
"""


def _child(keeper: ListenerKeeper, port: int, linger: float) -> subprocess.Popen[str]:
    channel, env = keeper.channel()
    try:
        return subprocess.Popen(
            [sys.executable, "-c", CHILD, str(port), str(linger)], env={**os.environ, **env},
            pass_fds=(channel.fileno(),), stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
    finally:
        channel.close()


def test_a_listener_outlives_its_child_and_the_next_child_serves_what_waited() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    keeper = ListenerKeeper()
    try:
        first = _child(keeper, port, 30)
        assert first.stdout is not None and first.stdout.readline().strip() == "opened"
        deadline = time.monotonic() + 5
        while port not in keeper.held:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        first.kill()
        first.wait()
        # No process listens now, yet the port accepts: the connection waits in the kept backlog.
        waiting = socket.create_connection(("127.0.0.1", port), timeout=5)
        second = _child(keeper, port, 0)
        assert second.stdout is not None and second.stdout.readline().strip() == "adopted"
        assert waiting.recv(100) == b"served by the second child"
        waiting.close()
        assert second.wait(timeout=10) == 0
        deadline = time.monotonic() + 5
        while port in keeper.held:  # dropped: the port is no one's now
            assert time.monotonic() < deadline
            time.sleep(0.01)
        with socket.socket() as refused:
            assert refused.connect_ex(("127.0.0.1", port)) != 0
    finally:
        keeper.close()


def test_a_late_answer_to_an_earlier_take_is_not_taken_for_the_next_one() -> None:
    """A take that timed out leaves its answer in the channel: the next take passes over it (closing
    its descriptor) and waits for the answer naming its own port."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    kept = KeptListeners(theirs)
    with socket.create_server(("127.0.0.1", 0)) as late, socket.create_server(("127.0.0.1", 0)) as asked:
        late_port, asked_port = late.getsockname()[1], asked.getsockname()[1]
        socket.send_fds(ours, [f"yes {late_port}".encode()], [late.fileno()])
        socket.send_fds(ours, [f"yes {asked_port}".encode()], [asked.fileno()])
        taken = kept.take(asked_port)
        assert taken is not None and taken.getsockname()[1] == asked_port
        assert ours.recv(100) == f"take {asked_port}".encode()
        taken.close()
        ours.send(f"no {late_port}".encode())  # a "no" for another port is passed over too
        ours.send(b"no 1")
        assert kept.take(1) is None
        ours.close()  # the parent gone: no answer, none waited for
        assert kept.take(2) is None
    theirs.close()
