"""mitmproxy's listeners handed to the parent that keeps them (`addresses/listeners.py`).

A worker of `serve --workers` listens through mitmproxy's proxyserver, which opens a server per
mode (`regular@PORT`) in `AsyncioServerInstance.listen`. Wrapped here, that method first takes the
listener a previous worker left on the port (kept by the parent: connections that came meanwhile
wait in its backlog and are accepted now) and otherwise opens its own and hands the parent a copy.
Only `webarena-live serve` installs this (it owns its process), and only when started with a keeper.
The method's signature, `listen(self, host, port) -> list[server]`, is the same in mitmproxy 11 and 12.
"""

from __future__ import annotations

import asyncio
from typing import Any

from webarena_live.addresses.listeners import kept_listeners


def adopt_kept_listeners() -> bool:
    """Wrap mitmproxy's listener creation when a parent keeps this process's listeners; whether it did."""
    kept = kept_listeners()
    if kept is None:
        return False
    from mitmproxy.proxy import mode_servers

    instance_class: Any = mode_servers.AsyncioServerInstance
    if getattr(instance_class.listen, "keeps_listeners", False):
        return True
    original = instance_class.listen

    async def listen(self: Any, host: str, port: int) -> list[Any]:
        if self.mode.transport_protocol != "tcp" or not port:
            return list(await original(self, host, port))
        sock = kept.take(port)
        if sock is not None:
            return [await asyncio.start_server(self.handle_stream, sock=sock)]
        servers = list(await original(self, host, port))
        for server in servers:
            for listener in server.sockets:
                kept.hold(listener)
        return servers

    listen.keeps_listeners = True  # type: ignore[attr-defined]
    instance_class.listen = listen
    return True


def drop_kept_listener(port: int) -> None:
    """The listener on `port` is closed for good (a session's address released)."""
    kept = kept_listeners()
    if kept is not None:
        kept.drop(port)
