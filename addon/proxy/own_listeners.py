"""The proxy's own listening addresses, kept as a set: mitmproxy's loop check at constant cost.

See docs/architecture.md, Workers. Before every upstream connection mitmproxy's proxyserver
(`Proxyserver.server_connect`, the same in mitmproxy 11 and 12) refuses a target that is one of its
own listeners, so a request naming the proxy itself does not loop. It finds them by asking every
server of its list for its `listen_addrs`, one `getsockname` per socket, and it knows nothing of the
sessions' listeners, which are not in that list. Here the same rule reads a set of (host, port, protocol),
updated when the servers change (mitmproxy's `Servers.changed` signal, sent after listeners are added
or removed and again once they listen), and an instance's addresses are read once, when it is new.
The sessions' own listeners (`proxy/session_listeners.py`) are no servers of mitmproxy's list: they are
added and discarded here one at a time, by whoever opens and closes them.

The proxyserver's hook is replaced on that instance only (hooks are looked up by name on each
event), and only when the mitmproxy at hand has what this relies on; otherwise its own walk stays and
no session listener is opened (a request through one could reach the proxy itself).
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from mitmproxy.proxy import server_hooks

logger = logging.getLogger(__name__)

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
"""Names mitmproxy takes for itself whatever host a listener is bound to (its own list)."""
SELF_CONNECT_ERROR = (
    "Request destination unknown. Unable to figure out where this request should be forwarded to."
)
"""mitmproxy's own words for the refusal, kept so nothing a client sees changes."""


class OwnListeners:
    """The listening addresses of one proxyserver, and its loop check reading them."""

    def __init__(self, proxyserver: Any) -> None:
        self.proxyserver = proxyserver
        self._by_instance: dict[int, tuple[Any, tuple[tuple[str, int, str], ...]]] = {}
        """mitmproxy's own servers (its `mode` option), followed by `refresh`."""
        self._added: dict[int, tuple[Any, tuple[tuple[str, int, str], ...]]] = {}
        """Instances of ours (`add`, `discard`): each session's listener."""
        self._ports: Counter[tuple[int, str]] = Counter()
        self._addresses: Counter[tuple[str, int, str]] = Counter()

    @classmethod
    def install(cls, proxyserver: Any) -> OwnListeners | None:
        """Take over `proxyserver`'s loop check; None (its own kept) when this mitmproxy lacks a part."""
        servers = getattr(proxyserver, "servers", None)
        changed = getattr(servers, "changed", None)
        if getattr(proxyserver, "own_listeners", None) is not None:
            return proxyserver.own_listeners
        if changed is None or not hasattr(changed, "connect") or not hasattr(proxyserver, "_connect_addr"):
            logger.debug("mitmproxy's loop check kept: its proxyserver differs from the one this knows")
            return None
        own = cls(proxyserver)
        changed.connect(own.refresh)
        own.refresh()
        proxyserver.own_listeners = own  # also keeps `own` alive: the signal may hold it weakly
        proxyserver.server_connect = own.server_connect
        return own

    def refresh(self) -> None:
        """Follow the servers as they are now: a new running instance's addresses are read once, a gone
        one's dropped. O(servers) dictionary steps per change, no system call for those already known."""
        present: dict[int, Any] = {id(instance): instance for instance in self.proxyserver.servers}
        for key in [key for key in self._by_instance if key not in present]:
            self._forget(key)
        for key, instance in present.items():
            if key in self._by_instance or not instance.is_running:
                continue  # not listening yet: read when the signal comes again after its start
            self._by_instance[key] = (instance, self._count(instance))

    def add(self, instance: Any) -> None:
        """A listening server instance of ours (not in mitmproxy's list): its addresses read once."""
        if id(instance) not in self._added and instance.is_running:
            self._added[id(instance)] = (instance, self._count(instance))

    def discard(self, instance: Any) -> None:
        """An instance of ours that no longer listens."""
        if id(instance) in self._added:
            self._uncount(self._added.pop(id(instance))[1])

    def _count(self, instance: Any) -> tuple[tuple[str, int, str], ...]:
        proto = instance.mode.transport_protocol
        protocols = ("tcp", "udp") if proto == "both" else (proto,)
        found = tuple(
            (str(host), int(port), protocol)
            for host, port, *_ in instance.listen_addrs
            for protocol in protocols
        )
        for host, port, protocol in found:
            self._ports[port, protocol] += 1
            self._addresses[host, port, protocol] += 1
        return found

    def _forget(self, key: int) -> None:
        self._uncount(self._by_instance.pop(key)[1])

    def _uncount(self, found: tuple[tuple[str, int, str], ...]) -> None:
        for host, port, protocol in found:
            self._ports[port, protocol] -= 1
            if not self._ports[port, protocol]:
                del self._ports[port, protocol]
            self._addresses[host, port, protocol] -= 1
            if not self._addresses[host, port, protocol]:
                del self._addresses[host, port, protocol]

    def is_own(self, host: str, port: int, protocol: str) -> bool:
        """Whether a connection to (host, port) over `protocol` would reach one of these listeners, by
        mitmproxy's rule: the same port and protocol, and a loopback name or the listener's own host."""
        if (port, protocol) not in self._ports:
            return False
        return host in LOOPBACK_NAMES or (host, port, protocol) in self._addresses

    def server_connect(self, data: server_hooks.ServerConnectionHookData) -> None:
        """`Proxyserver.server_connect`, the same two steps, the second at constant cost."""
        server = data.server
        if server.sockname is None:
            server.sockname = self.proxyserver._connect_addr
        assert server.address
        host, port, *_ = server.address
        if self.is_own(host, port, server.transport_protocol):
            server.error = SELF_CONNECT_ERROR
