"""Each session's address is a listener of its own, opened and closed alone (`proxy/session_listeners.py`):
starting or finishing a session changes no mitmproxy mode and touches no other session's listener, and
the proxy still refuses a request aimed at one of its own session addresses.

In-process on a real mitmproxy (`DumpMaster` with the addon, as `webarena-live serve` builds it), its
control API and proxy on real sockets of 127.0.0.1, the demo shop as the site.
"""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path
from typing import Any

import httpx
import pytest
from mitmproxy import options
from mitmproxy.tools.dump import DumpMaster

from tests.support.serve_process import NAVIGATED, NAVIGATION, shop
from webarena_live.launch import free_ports
from webarena_live.proxy.addon import WebArenaLive

__all__ = ["shop"]  # a fixture

pytestmark = pytest.mark.timeout(180)

OTHERS = 50


async def _get(
    port: int, url: str, *, keep: tuple[Any, Any] | None = None
) -> tuple[bytes, bytes, tuple[Any, Any]]:
    """One HTTP/1.1 request for `url` through the proxy on `port` (on the connection `keep` when
    given): its status line, its body and the connection, left open."""
    reader, writer = keep if keep is not None else await asyncio.open_connection("127.0.0.1", port)
    host = url.split("/")[2]
    head = "".join(f"{name}: {value}\r\n" for name, value in NAVIGATION.items())
    writer.write(f"GET {url} HTTP/1.1\r\nHost: {host}\r\n{head}\r\n".encode())
    await writer.drain()
    status = await reader.readline()
    length = 0
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode().partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    body = await reader.readexactly(length)
    return status, body, (reader, writer)


def _bindable(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def test_sessions_open_and_close_alone_and_their_addresses_are_no_targets(tmp_path: Path, shop: str) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"environments": {"__SHOPPING__": {"urls": [shop]}}}))

    async def run() -> None:
        opts = options.Options()
        master = DumpMaster(opts, with_termlog=False, with_dumper=False)
        live = WebArenaLive()
        master.addons.add(live)
        proxy_port, control_port = free_ports(2)
        opts.update(
            listen_host="127.0.0.1", mode=[f"regular@{proxy_port}"], confdir=str(tmp_path / "conf"),
            webarena_control_port=control_port, webarena_config=str(config),
            webarena_journal_dir=str(tmp_path / "journal"), webarena_output_dir=str(tmp_path / "out"),
        )  # fmt: skip
        running = asyncio.get_running_loop().create_task(master.run())
        control = f"http://127.0.0.1:{control_port}"
        try:
            async with httpx.AsyncClient(base_url=control, timeout=30) as client:
                for _ in range(200):
                    if live.server is not None:
                        break
                    await asyncio.sleep(0.05)
                assert (await client.get("/health")).status_code == 200
                proxyserver: Any = master.addons.get("proxyserver")
                updates = 0
                update = proxyserver.servers.update

                async def counted(modes: Any) -> bool:
                    nonlocal updates
                    updates += 1
                    return bool(await update(modes))

                proxyserver.servers.update = counted
                modes, servers = list(opts.mode), list(proxyserver.servers)

                async def start(name: str) -> int:
                    answer = await client.post("/sessions", json={"task_id": 1003, "session": name})
                    assert answer.status_code == 200, answer.text
                    return int(answer.json()["proxy"].rsplit(":", 1)[1])

                async def finish(name: str) -> None:
                    answer = await client.post(f"/sessions/{name}/finish", json=NAVIGATED)
                    assert answer.status_code == 200, answer.text

                port_a = await start("a")
                assert opts.mode == modes and updates == 0  # no mode of mitmproxy's: a listener of its own
                listener_a = live.addresses.listeners.by_port[port_a]
                status, _, kept = await _get(port_a, f"{shop}/")  # a browser's connection, kept alive
                assert status.startswith(b"HTTP/1.1 200"), status

                closed = []
                for index in range(OTHERS):
                    closed.append(await start(f"other-{index}"))
                    status, _, conn = await _get(closed[-1], f"{shop}/?other={index}")
                    conn[1].close()
                    assert status.startswith(b"HTTP/1.1 200"), status  # each its own session's flow
                    await finish(f"other-{index}")
                # No mitmproxy mode changed, no server update ran: the other listener was never touched.
                assert opts.mode == modes and list(proxyserver.servers) == servers and updates == 0
                assert live.addresses.listeners.by_port[port_a] is listener_a and listener_a.is_running
                status, _, kept = await _get(port_a, f"{shop}/enamel-camp-mug.html", keep=kept)
                assert status.startswith(b"HTTP/1.1 200"), status  # the same connection, still open
                kept[1].close()
                assert all(_bindable(port) for port in closed)  # each finished session's port is free
                trace = (await client.get("/sessions/a/trace")).json()["events"]
                assert [e["url"] for e in trace] == [f"{shop}/", f"{shop}/enamel-camp-mug.html"]
                other = (await client.get("/sessions/other-7/trace")).json()["events"]
                assert [e["url"] for e in other] == [f"{shop}/?other=7"]

                # Through a's address to b's: the proxy would connect to itself; refused as mitmproxy does.
                port_b = await start("b")
                status, _, conn = await _get(port_b, f"{shop}/")
                conn[1].close()
                status, body, conn = await _get(port_a, f"http://127.0.0.1:{port_b}/")
                conn[1].close()
                assert status.startswith(b"HTTP/1.1 502") and b"Request destination unknown" in body, body
                await finish("b")
                status, body, conn = await _get(port_a, f"http://localhost:{port_b}/")
                conn[1].close()  # b's port closed: no longer ours, so tried (and nobody listens)
                assert status.startswith(b"HTTP/1.1 502") and b"Request destination unknown" not in body, body
                assert _bindable(port_b)
                own = proxyserver.own_listeners
                assert not own.is_own("127.0.0.1", port_b, "tcp") and own.is_own("localhost", port_a, "tcp")
        finally:
            master.shutdown()
            await asyncio.wait_for(running, 30)

    asyncio.run(run())
