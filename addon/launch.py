"""Start `webarena-live serve` as a child process and talk to it through the shipped client.

    from webarena_live.launch import ServeProcess

    with ServeProcess("--tasks", "tasks.json", "--config", "config.json") as served:
        started = served.client.start(task_id=1)
        ...  # browse through served.proxy_url, then served.client.finish(...)

The one way the demo, the test suite and the benchmarks run the proxy: on free
ports of 127.0.0.1 (or the ones given), its output in a log file, ready once
`GET /health` answers, stopped with Ctrl-C's signal (then killed if it hangs).
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import logging
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import httpx

from webarena_live.client import Client
from webarena_live.evaluator import WebArenaLiveError

logger = logging.getLogger(__name__)

START_TIMEOUT = 60.0
STOP_TIMEOUT = 20.0
READY_ASK = 5.0
"""How long one `/health` of a starting proxy may take before it is asked again."""
PORT_TAKEN = "address already in use"
"""How a start that lost one of its ports says so, in any case (the OS's words for EADDRINUSE, in its log)."""
PORT_DRAWS = 3
"""Starts on newly drawn ports when another program took one between the draw and the bind."""


class Keeper(Protocol):
    """Keeps a process's listening sockets across its restarts (`addresses/listeners.py`)."""

    def channel(self) -> tuple[socket.socket, dict[str, str]]:
        """The child's end of a new channel to the keeper, and the environment that names it."""
        ...

    def settle(self) -> None:
        """Wait until the messages of the process that just ended are all handled."""
        ...

    def drop(self, port: int) -> None:
        """Close the kept listener of `port`, if any."""
        ...


class LaunchError(WebArenaLiveError):
    """The proxy exited or did not answer in time; the message ends with its log's last lines."""


@dataclass(frozen=True)
class Ports:
    """The proxy's three listening ports: credentials optional, credentials asked (407), control API."""

    proxy: int
    session: int
    control: int


EPHEMERAL_PORTS = Path("/proc/sys/net/ipv4/ip_local_port_range")
QUIET_PORTS_FROM = 20000
"""The lowest port `free_ports` draws: above Ray's worker ports (10002 to 19999 unless configured)."""


_draw = random.Random()  # its own: a program that seeds `random` draws no one else's ports


def _quiet_ports() -> range:
    """Ports below the kernel's ephemeral range, from which no outgoing connection takes its local port."""
    try:
        first_ephemeral = int(EPHEMERAL_PORTS.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        first_ephemeral = 32768  # Linux's default; elsewhere the draw still checks each port
    return range(QUIET_PORTS_FROM, first_ephemeral)


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """Distinct ports free on `host` a moment ago, drawn at random below the ephemeral range.

    A port the kernel hands out for `bind(0)` comes from the range outgoing connections take their
    local ports from: on a busy machine one of them could take it between this check and the bind
    that follows. Where no quiet range is left, the kernel's choice it is."""
    quiet = _quiet_ports()
    draws = (_draw.choice(quiet) for _ in range(200 if quiet else 0))
    sockets: list[socket.socket] = []
    try:
        for port in itertools.chain(draws, itertools.repeat(0, count)):  # then the kernel's choice
            if len(sockets) == count:
                break
            sock = socket.socket()
            try:
                sock.bind((host, port))
            except OSError:  # taken: the next one
                sock.close()
                continue
            sockets.append(sock)
        if len(sockets) < count:
            raise OSError(f"no {count} free ports on {host}")
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def taken_ports(ports: Iterable[int], host: str = "127.0.0.1") -> list[int]:
    """Those of `ports` another socket is bound to on `host`: what a listener binding it would be
    refused (with `SO_REUSEADDR`, as servers bind, so a connection closing on it does not count)."""
    taken = []
    for port in ports:
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((host, port))
            except OSError as error:
                if error.errno == errno.EADDRINUSE:
                    taken.append(port)
    return taken


def _new_log() -> Path:
    """A fresh log file in the temp directory, kept after the process ends (it says why it stopped)."""
    handle, name = tempfile.mkstemp(prefix="webarena-live-serve-", suffix=".log")
    os.close(handle)  # the child writes it through a handle of its own
    return Path(name)


def serve_command() -> list[str]:
    """`webarena-live serve` of this interpreter's installation (no console script needed)."""
    return [sys.executable, "-m", "webarena_live.commands.cli", "serve"]


class ServeProcess:
    """`webarena-live serve ARGS` on `ports` (free ones by default) with its log in `log`.

    `args` name no ports. `command` replaces `serve_command()` for another host of the addon (plain
    `mitmdump -s "$(webarena-live addon-path)"`), which then gets no port flags: its `args` say all;
    without the addon (`control=False`, a plain mitmdump baseline) it is ready once its proxy port
    accepts connections. `inherit_output` prints its output where the caller's goes, not to `log`
    (the workers of `serve --workers`).
    `own_session` starts it in a process session of its own, so a terminal's Ctrl-C reaches only the
    caller, which stops it in order; `preexec_fn` runs in the child before it starts (CPU pinning).
    `host` is where its control port is reached (a Ray worker binds the address of its node).
    `keeper` keeps its listening sockets across its restarts (`addresses/listeners.py`): each start
    gets a channel to it.
    `redraw` draws new ports when another program took one before the child bound it: by default only
    for ports drawn here; a caller that publishes the ports only once started (a fleet's worker on its
    first start) asks for it too, and reads `ports` afterwards.
    """

    def __init__(
        self,
        *args: str,
        ports: Ports | None = None,
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
        log: Path | None = None,
        command: Sequence[str] | None = None,
        own_session: bool = False,
        preexec_fn: Callable[[], Any] | None = None,
        control: bool = True,
        inherit_output: bool = False,
        host: str = "127.0.0.1",
        keeper: Keeper | None = None,
        redraw: bool | None = None,
        listen_host: str | None = None,
    ) -> None:
        self.host = host
        self.listen_host = listen_host or host
        """Where its proxy ports listen (`--listen-host` in `args`), when not where its control port does."""
        # Ports drawn here are drawn again if another program takes one before the child binds it;
        # ports given are the caller's to choose unless it says otherwise, and ports named in a
        # `command`'s own arguments cannot be changed from here.
        self._redraw = (ports is None if redraw is None else redraw) and command is None
        self.ports = ports or Ports(*free_ports(3, host))
        # Printed where the caller's output goes: no log file (an empty one would stay behind).
        self.log = log or (Path(os.devnull) if inherit_output else _new_log())
        self.keeper = keeper
        self._args = args
        self.command = [*command, *args] if command is not None else self._serve_command()
        self._cwd, self._own_session, self._preexec_fn = cwd, own_session, preexec_fn
        self._control = control
        self._inherit_output = inherit_output
        self._env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        self.process: subprocess.Popen[bytes] | None = None
        self.client = Client(self.control_url, timeout=60)
        self.health: dict[str, Any] = {}

    def _serve_command(self) -> list[str]:
        ports_flags = [
            "--port", str(self.ports.proxy), "--session-port", str(self.ports.session or "off"),
            "--control-port", str(self.ports.control),
        ]  # fmt: skip
        return [*serve_command(), *ports_flags, *self._args]

    @property
    def control_url(self) -> str:
        return f"http://{self.host}:{self.ports.control}"

    @property
    def proxy_url(self) -> str:
        """The proxy port: traffic with credentials goes to their session, without to `default`."""
        return f"http://{self.host}:{self.ports.proxy}"

    @property
    def session_proxy_url(self) -> str:
        """The session port: it asks for credentials (407), as browsers need."""
        return f"http://{self.host}:{self.ports.session}"

    @property
    def pid(self) -> int:
        assert self.process is not None, "not started"
        return self.process.pid

    def start(self, *, timeout: float = START_TIMEOUT) -> ServeProcess:
        """Start it and wait until `/health` answers; `LaunchError` if it exits or stays silent."""
        for draw in range(1, PORT_DRAWS + 1):
            try:
                return self._start(timeout)
            except LaunchError as error:
                if not (self._redraw and draw < PORT_DRAWS):
                    raise
                self._release_kept()
                if not self._lost_a_port(error):
                    raise
            self.client.close()
            proxy, session, control = self._draw()
            self.ports = Ports(proxy, session if self.ports.session else 0, control)  # off stays off
            self.command = self._serve_command()
            self.client = Client(self.control_url, timeout=60)
        raise AssertionError("unreachable: the last draw raises")

    def _release_kept(self) -> None:
        """Close what the failed child bound and handed to the keeper: no one's now."""
        if self.keeper is not None:
            self.keeper.settle()
            for port in (self.ports.proxy, self.ports.session, self.ports.control):
                if port:
                    self.keeper.drop(port)

    def _draw(self) -> list[int]:
        """Three ports free where each is bound: the proxy ports on the listen host, the control port here."""
        ports = free_ports(3, self.host)
        for _ in range(20):
            if self.listen_host == self.host or not taken_ports(ports[:2], self.listen_host):
                break
            ports = free_ports(3, self.host)
        return ports

    def _lost_a_port(self, error: LaunchError) -> bool:
        """Whether the failed start lost one of its ports to another program: its log says so, or,
        where its output is not ours to read, one of them is bound by someone else now."""
        if not self._inherit_output:
            return PORT_TAKEN in str(error).lower()
        # the child is gone (exited, or stopped for its silence): what is bound now is someone else's
        proxies = [port for port in (self.ports.proxy, self.ports.session) if port]
        lost = taken_ports(proxies, self.listen_host) + taken_ports([self.ports.control], self.host)
        if lost:  # its own error is above, in the output it shares
            logger.warning("webarena-live: port %s was taken by another program since it was drawn; "
                           "starting on new ports", ", ".join(map(str, lost)))  # fmt: skip
        return bool(lost)

    def _start(self, timeout: float) -> ServeProcess:
        channel, named = self.keeper.channel() if self.keeper is not None else (None, {})
        env = {**self._env, **named}
        try:
            with contextlib.ExitStack() as opened:
                output: dict[str, Any] = {}
                if not self._inherit_output:
                    log = opened.enter_context(self.log.open("wb"))
                    output = {"stdout": log, "stderr": subprocess.STDOUT}
                self.process = subprocess.Popen(
                    self.command, stdin=subprocess.DEVNULL, cwd=self._cwd, env=env,
                    start_new_session=self._own_session, preexec_fn=self._preexec_fn,
                    pass_fds=(channel.fileno(),) if channel is not None else (), **output,
                )  # fmt: skip
        finally:
            if channel is not None:
                channel.close()  # the child has its own copy
        deadline = time.monotonic() + timeout
        # Asked briefly, again and again: a port some other program listens on accepts and never
        # answers, and the child's exit must not wait behind that silence.
        with contextlib.closing(Client(self.control_url, timeout=READY_ASK)) as ready:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    code = self.process.returncode
                    raise LaunchError(f"the proxy exited with code {code}: {self.log_tail()}")
                try:
                    if not self._control:
                        socket.create_connection((self.host, self.ports.proxy), timeout=1).close()
                        return self
                    self.health = ready.health()
                    return self
                except (OSError, httpx.TransportError, WebArenaLiveError):
                    time.sleep(0.05)
        self.stop()
        where = f"{self.control_url}/health" if self._control else self.proxy_url
        raise LaunchError(f"the proxy did not answer on {where} within {timeout:.0f}s: {self.log_tail()}")

    def log_tail(self, chars: int = 4000) -> str:
        if self._inherit_output:
            return "(its output is above)"
        try:
            return self.log.read_text(encoding="utf-8", errors="replace")[-chars:]
        except OSError:
            return "(no log)"

    def stop(self, *, timeout: float = STOP_TIMEOUT) -> int | None:
        """Stop it as Ctrl-C does (killed if it hangs); its exit code, None if it never started."""
        self.client.close()
        process = self.process
        if process is None:
            return None
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        return process.returncode

    def __enter__(self) -> ServeProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
