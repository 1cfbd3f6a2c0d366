"""The ports of `serve --workers`' workers: drawn by the front before any worker starts, so another
program can take one in between. A worker's first start then draws again (nothing has been told its
ports yet; a restart keeps them, `test_workers.py`). Real `serve` processes on 127.0.0.1, started by
`LocalWorkers` as the front starts them."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import httpx
import pytest

from tests.support.addon_helpers import write_config, write_tasks
from webarena_live.fleet.workers.local import LocalWorkers
from webarena_live.launch import LaunchError

pytestmark = pytest.mark.timeout(180)


class Told:
    """The front's side of `WorkerEvents`: what the workers told it."""

    def __init__(self) -> None:
        self.said: list[tuple[str, int]] = []

    def worker_down(self, index: int) -> None:
        self.said.append(("down", index))

    async def resume_on(self, index: int) -> None:
        self.said.append(("resume", index))

    def worker_lost(self, index: int, reason: str) -> None:
        self.said.append(("lost", index))


def serve_args(tmp_path: Path) -> list[str]:
    return ["--tasks", str(write_tasks(tmp_path)), "--config", str(write_config(tmp_path, "http://127.0.0.1:9")),
            "--set", f"confdir={tmp_path}"]  # fmt: skip


def taken(port: int, host: str = "127.0.0.1") -> socket.socket:
    """Another program listening on `port` of `host`."""
    sock = socket.socket()
    sock.bind((host, port))
    sock.listen()
    return sock


@pytest.mark.parametrize("listen_host", ["127.0.0.1", "127.0.0.2"])
def test_a_port_taken_before_the_first_start_is_drawn_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, listen_host: str
) -> None:
    """Taken where the worker binds it: the control port on 127.0.0.1, the proxy port on the workers'
    listen host (another loopback address: the port is free on 127.0.0.1)."""
    args = [*serve_args(tmp_path), "--listen-host", listen_host]
    state = {"XDG_STATE_HOME": str(tmp_path / "state")}
    workers = LocalWorkers(2, lambda index, front_at: args, env=state, listen_host=listen_host)
    lost_control, lost_proxy = workers[0].ports.control, workers[1].ports.proxy
    told = Told()

    async def run() -> None:
        await workers.start(told, "127.0.0.1:9")
        try:
            for worker in workers:
                assert worker.up
                health = httpx.get(worker.control_url + "/health", timeout=30).json()
                assert health["status"] == "ok"
                assert (health["proxy_port"], health["control_port"]) == (
                    worker.ports.proxy,
                    worker.ports.control,
                )
            # What a failed child handed its keeper for the ports it lost is dropped with them.
            for keeper, worker in zip(workers.keepers, workers, strict=True):
                assert set(keeper.held) <= {worker.ports.proxy, worker.ports.session, worker.ports.control}
        finally:
            await workers.stop()

    with taken(lost_control), taken(lost_proxy, listen_host):  # between the front's draw and the binds
        asyncio.run(run())
    assert workers[0].ports.control != lost_control and workers[1].ports.proxy != lost_proxy
    assert told.said == []  # a first start that draws again is no worker going down
    redrawn = [r.getMessage() for r in caplog.records if "taken by another program" in r.getMessage()]
    assert [str(lost_control) in line for line in redrawn] == [True, False], redrawn
    assert str(lost_proxy) in redrawn[1], redrawn


def test_a_first_start_that_fails_otherwise_keeps_its_ports_and_says_why(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Only a taken port is drawn again: any other failure is told at once (the worker's output is
    the front's), and nothing keeps running."""
    args = ["--tasks", str(tmp_path / "nope.json")]
    workers = LocalWorkers(1, lambda index, front_at: args, env={"XDG_STATE_HOME": str(tmp_path / "state")})
    drawn = workers[0].ports
    with pytest.raises(LaunchError, match="exited with code 2"):
        asyncio.run(workers.start(Told(), "127.0.0.1:9"))
    assert capfd.readouterr().err.count("nope.json: cannot read task file") == 1
    assert workers[0].ports == drawn
    assert workers[0].process is not None and workers[0].process.process is not None
    assert workers[0].process.process.poll() is not None
