"""The sessions' own listeners: mitmproxy server instances of ours, opened and closed one at a time.

See docs/architecture.md, Workers. A session's address is a plain HTTP proxy on a port of its own
(`regular@PORT`). It is a mitmproxy `ServerInstance` made and started here, not a mode of the `mode`
option: every change of that list makes mitmproxy re-check every mode (`Proxyserver.configure`, two
option reads per mode, each a deep copy) and walk every server (`Servers.update`), and mitmweb sends
the whole list to its pages, so with a listener per session each start and finish cost grew with the
open sessions. An instance of ours costs one bind at its start and one close at its finish.

Connections accepted here are mitmproxy's as any other: the instance hands them to the proxyserver
(the `ServerManager` it is made with) and the addons' hooks, as a mode's listener does. What the
`mode` list gave besides, this module gives itself:
- mitmproxy's loop check (`Proxyserver.server_connect`) reads the proxy's listeners from
  `proxy/own_listeners.py`, where each instance of ours is added when it listens and taken out once it
  is closed, so a request aimed at a session's own address is still refused;
- a worker of `serve --workers` hands its listening sockets to its parent: `proxy/kept_listeners.py`
  wraps `AsyncioServerInstance.listen`, which these instances use too.
They are not in mitmproxy's list of modes (`mode` option, mitmweb's Capture tab): the flows they carry
are listed, with their session, as any other.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from mitmproxy import ctx
from mitmproxy.proxy import mode_servers

from webarena_live.proxy.own_listeners import OwnListeners

logger = logging.getLogger(__name__)


def session_mode(port: int) -> str:
    """The mode spec of a session's listener (mitmproxy's syntax: a regular proxy on `port`)."""
    return f"regular@{port}"


class SessionListeners:
    """The listening server instances of the sessions' addresses in this mitmproxy, by port."""

    def __init__(self) -> None:
        self.by_port: dict[int, Any] = {}
        self._closing: set[asyncio.Task[None]] = set()

    async def open(self, port: int) -> str | None:
        """Listen on `port` for a session; what went wrong, or None once it listens. Other listeners
        are not touched."""
        proxyserver: Any = ctx.master.addons.get("proxyserver")
        own = OwnListeners.install(proxyserver)
        if own is None:  # its loop check would not see this listener: a request could proxy to itself
            return "this mitmproxy's proxy server is not one webarena-live knows (mitmproxy 11 or 12)"
        if not ctx.options.server:
            return "this mitmproxy runs without a proxy server (server=false)"
        if port in self.by_port:
            return None
        if self._closing:  # a port released a moment ago may be this one: closed before it is bound again
            await self.settle()
        instance: Any = mode_servers.ServerInstance.make(session_mode(port), proxyserver)
        self.by_port[port] = instance  # taken while it starts: a second claim of the port waits on no lock
        try:
            await instance.start()
        except Exception as error:  # OSError (in use, refused), or anything mitmproxy raises
            self.by_port.pop(port, None)
            return str(error) or type(error).__name__
        if self.by_port.get(port) is not instance:  # closed while it started (its session finished)
            await instance.stop()
            return "the session's address was released while it opened"
        own.add(instance)
        logger.debug("session address on port %d", port)
        return None

    def close(self, port: int) -> None:
        """Stop listening on `port` (connections accepted before stay open); the socket is closed in a
        task of its own, which `settle` waits for."""
        instance = self.by_port.pop(port, None)
        if instance is None or not instance.is_running:
            return  # none, or still starting: `open` sees it gone and closes it
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop: the process is ending, and its sockets with it
            return
        task = loop.create_task(self._close(instance))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def _close(self, instance: Any) -> None:
        try:
            await instance.stop()
        except Exception:  # a close that fails leaves nothing listening we could do more about
            logger.exception("webarena-live: closing a session's listener failed")
        finally:  # its address no longer ours only once it no longer listens
            own = getattr(instance.manager, "own_listeners", None)
            if own is not None:
                own.discard(instance)

    async def settle(self) -> None:
        """Wait until the listeners closed so far no longer listen."""
        if self._closing:
            await asyncio.gather(*list(self._closing), return_exceptions=True)
