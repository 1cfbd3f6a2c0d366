"""Machines on one machine: network namespaces a test makes itself, and Ray nodes inside them.

`Namespaces` makes namespaces joined by veth pairs (both ends inside namespaces, addresses only there)
and removes them after. `Namespaces.thread(name)` runs calls in a thread that entered a namespace
(`setns` changes only the calling thread's network namespace): sockets it opens, and processes it
starts (a browser), live there. `RayNode` runs `ray start` inside a namespace in a process group of
its own, so the test stops exactly what it started. Nothing leaves the namespaces and loopback.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

CLONE_NEWNET = 0x40000000
RAY = str(Path(sys.executable).with_name("ray"))
T = TypeVar("T")


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


def enter(namespace: str) -> None:
    """Move the calling thread into `namespace` (`ip netns`'s name)."""
    libc = ctypes.CDLL(None, use_errno=True)
    with open(f"/run/netns/{namespace}") as handle:
        if libc.setns(handle.fileno(), CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns into {namespace}")


class Namespaces:
    """Namespaces by role, each veth pair given as (role, address, role, address) with a /24 each side."""

    def __init__(self, roles: list[str], links: list[tuple[str, str, str, str]]) -> None:
        tag = uuid.uuid4().hex[:6]
        self.names = {role: f"wl{role[:2]}{tag}" for role in roles}
        self.links: dict[str, str] = {}
        """The veth end each role holds (one link per role here), by role."""
        self._threads: dict[str, ThreadPoolExecutor] = {}
        try:
            for name in self.names.values():
                ip("netns", "add", name)
                ip("-n", name, "link", "set", "lo", "up")
            for number, (left, left_address, right, right_address) in enumerate(links):
                ends = (f"v{number}{left[:2]}{tag}", f"v{number}{right[:2]}{tag}")
                ip("link", "add", ends[0], "netns", self.names[left], "type", "veth", "peer", "name",
                   ends[1], "netns", self.names[right])  # fmt: skip
                for role, end, address in ((left, ends[0], left_address), (right, ends[1], right_address)):
                    ip("-n", self.names[role], "addr", "add", f"{address}/24", "dev", end)
                    ip("-n", self.names[role], "link", "set", end, "up")
                    self.links.setdefault(role, end)
        except BaseException:
            self.remove()
            raise

    def run(self, role: str, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """`call(*args, **kwargs)` in a thread inside `role`'s namespace (one thread per role, kept)."""
        if role not in self._threads:
            self._threads[role] = ThreadPoolExecutor(1, initializer=enter, initargs=(self.names[role],))
        return self._threads[role].submit(call, *args, **kwargs).result()

    def pool(self, role: str, workers: int) -> ThreadPoolExecutor:
        """Threads inside `role`'s namespace, for calls at once (the caller shuts them down)."""
        return ThreadPoolExecutor(workers, initializer=enter, initargs=(self.names[role],))

    def link(self, role: str, up: bool) -> None:
        """Take `role`'s link down, or bring it up."""
        ip("-n", self.names[role], "link", "set", self.links[role], "up" if up else "down")

    def exec(self, role: str, *argv: str) -> list[str]:
        return ["ip", "netns", "exec", self.names[role], *argv]

    def remove(self) -> None:
        for thread in self._threads.values():
            thread.shutdown(wait=False, cancel_futures=True)
        for name in self.names.values():
            subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)


class RayNode:
    """`ray start` inside a namespace, in a process group of its own (the test's to stop)."""

    def __init__(self, spaces: Namespaces, role: str, *args: str, env: dict[str, str], log: Path) -> None:
        self.temp = tempfile.mkdtemp(prefix="wlray")  # short: Ray's socket paths must fit 107 bytes
        with log.open("ab") as output:
            self.process = subprocess.Popen(
                spaces.exec(role, RAY, "start", *args, "--disable-usage-stats", f"--temp-dir={self.temp}"),
                env=env, stdout=output, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        if self.process.wait(timeout=120) != 0:
            self.stop()
            raise RuntimeError(f"ray start in {role} failed: {log.read_text()[-3000:]}")

    def pids(self, name: str) -> list[int]:
        """The pids of this node's processes whose command is `name` (`raylet`)."""
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError):
                if (
                    os.getpgid(int(entry.name)) == self.process.pid
                    and (entry / "comm").read_text().strip() == name
                ):
                    found.append(int(entry.name))
        return found

    def stop(self) -> None:
        """Every process of this node, killed (Ray's own stop would stop every node of the machine)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        time.sleep(0.2)
        subprocess.run(["rm", "-rf", self.temp], check=False, timeout=60)


@contextlib.contextmanager
def machines(roles: list[str], links: list[tuple[str, str, str, str]]) -> Iterator[Namespaces]:
    spaces = Namespaces(roles, links)
    try:
        yield spaces
    finally:
        spaces.remove()
