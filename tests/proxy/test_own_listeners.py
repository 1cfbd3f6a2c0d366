"""mitmproxy's check that a target is not one of the proxy's own listeners, at constant cost
(`proxy/own_listeners.py`): the same refusals as mitmproxy's own walk, read from a set kept as the
listeners open and close, with no `listen_addrs` (a `getsockname` per server) per connection.

In-process on mitmproxy's real proxyserver with real listening sockets, then through a real `serve`
with session addresses opening and closing.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import requests
from mitmproxy import connection
from mitmproxy.addons.proxyserver import Proxyserver
from mitmproxy.proxy import mode_servers, server_hooks
from mitmproxy.test import taddons

from tests.support.serve_process import NAVIGATED, NAVIGATION, shop, start_serve
from webarena_live.launch import free_ports
from webarena_live.proxy.own_listeners import SELF_CONNECT_ERROR, OwnListeners

__all__ = ["shop"]  # a fixture

pytestmark = pytest.mark.timeout(120)


def _connect(target: tuple[str, int]) -> server_hooks.ServerConnectionHookData:
    server = connection.Server(address=target)
    client = connection.Client(peername=("127.0.0.1", 1), sockname=("127.0.0.1", 2))
    return server_hooks.ServerConnectionHookData(server=server, client=client)


def _refused(ps: Any, target: tuple[str, int]) -> bool:
    data = _connect(target)
    ps.server_connect(data)
    return data.server.error == SELF_CONNECT_ERROR


def test_the_same_refusals_as_mitmproxys_walk_without_walking(monkeypatch: pytest.MonkeyPatch) -> None:
    async def run() -> None:
        ps = Proxyserver()
        with taddons.context(ps) as tctx:
            tctx.options.listen_host = "127.0.0.1"
            free = free_ports(5)  # four to listen on, one nobody listens on
            tctx.configure(ps, mode=[f"regular@{port}" for port in free[:3]], server=True)
            assert await ps.setup_servers()
            ports = [port for server in ps.servers for _, port, *_ in server.listen_addrs]
            own = OwnListeners.install(ps)
            assert own is not None and OwnListeners.install(ps) is own  # once per proxyserver

            reads = 0
            original = mode_servers.AsyncioServerInstance.listen_addrs

            def counted(self: Any) -> Any:
                nonlocal reads
                reads += 1
                return original.fget(self)  # type: ignore[attr-defined]

            monkeypatch.setattr(mode_servers.AsyncioServerInstance, "listen_addrs", property(counted))
            for port in ports:  # every listener, by any of mitmproxy's loopback names
                for host in ("127.0.0.1", "localhost", "::1"):
                    assert _refused(ps, (host, port)), (host, port)
            assert not _refused(ps, ("127.0.0.1", free[4]))  # not ours
            assert not _refused(ps, ("10.1.2.3", ports[0]))  # ours only on loopback here
            assert reads == 0  # no listener asked per connection
            data = _connect(("127.0.0.1", free[4]))
            ps.server_connect(data)
            assert data.server.sockname == ps._connect_addr  # mitmproxy's first step kept

            # One listener closed, one opened: the set follows mitmproxy's own signal.
            tctx.configure(ps, mode=[f"regular@{port}" for port in free[1:4]])
            assert await ps.setup_servers()
            assert not _refused(ps, ("127.0.0.1", free[0]))
            assert _refused(ps, ("127.0.0.1", free[3])) and _refused(ps, ("127.0.0.1", free[1]))
            reads_per_change = reads
            for _ in range(100):
                _refused(ps, ("127.0.0.1", free[1]))
            assert reads == reads_per_change  # the new one read once, at its start
            tctx.configure(ps, server=False)
            await ps.setup_servers()

    asyncio.run(run())


def test_a_session_address_is_refused_as_a_target_while_it_is_open(tmp_path: Path, shop: str) -> None:
    served, control, _ = start_serve(
        tmp_path, shop, tmp_path / "state", "--output-dir", str(tmp_path / "out")
    )
    try:

        def start(name: str) -> str:
            body = {"task_id": 1003, "session": name}
            proxy: str = requests.post(f"{control}/sessions", json=body, timeout=30).json()["proxy"]
            return proxy

        a, b = start("a"), start("b")
        # Through a's address to b's address: the proxy would connect to itself; mitmproxy's refusal.
        looped = requests.get(f"{b}/", proxies={"http": a}, headers=NAVIGATION, timeout=10)
        assert looped.status_code == 502 and "Request destination unknown" in looped.text
        c = start("c")  # opened after the check took over: refused as well
        looped = requests.get(f"{c}/x", proxies={"http": a}, headers=NAVIGATION, timeout=10)
        assert looped.status_code == 502 and "Request destination unknown" in looped.text

        requests.get(f"{shop}/", proxies={"http": b}, headers=NAVIGATION, timeout=10)
        assert requests.post(f"{control}/sessions/b/finish", json=NAVIGATED, timeout=30).status_code == 200
        # b's port closed: no longer ours, so mitmproxy tries it (and nothing listens there).
        gone = requests.get(f"{b}/", proxies={"http": a}, headers=NAVIGATION, timeout=10)
        assert gone.status_code >= 400 and "Request destination unknown" not in gone.text, gone.text
        # The site itself still goes through.
        assert (
            requests.get(f"{shop}/", proxies={"http": a}, headers=NAVIGATION, timeout=10).status_code == 200
        )
    finally:
        print(served.stop()[-2000:])
