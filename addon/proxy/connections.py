"""Who each client connection belongs to: a session's own address, or the proxy credentials it sent.

See docs/architecture.md, Capture and Workers. A connection accepted on a session's own address is
pinned to that session in `client_connected` (a dictionary lookup by the port it came in on); any other
names its session with the username of its proxy credentials, remembered per connection, so requests
inside an HTTPS tunnel land in the session named on the CONNECT. Beyond loopback, a pinned connection
from a client the session does not let in is a stranger until it sends the session's secret
(`proxy/strangers.py`). Every lookup here is by connection id or port: nothing walks the sessions.

A pinned connection belongs to whoever holds its address *now* (`session_of`): when the address passes
to another session (the first finished, the next start got its port), each request on a connection
kept open from before is the new holder's. A browser (or an MCP browser server) started once with
`--proxy-server` keeps its keep-alive connections and HTTPS tunnels to the proxy from task to task;
handing them on, rather than closing them, loses nothing in flight and asks no client to retry a
request on a closed connection. A request is assigned when its head arrives, so one in flight when
the address changed hands stays the session it was sent in (a finished session's: a late event). While
nobody holds the address, its connections stay the last holder's (counted as late events, as before).
"""

from __future__ import annotations

import logging
from typing import Any

from mitmproxy import connection, http

from webarena_live.proxy.credentials import PROXY_AUTHORIZATION, challenge, take_credentials
from webarena_live.proxy.session_addresses import SessionAddresses

logger = logging.getLogger(__name__)

# Keys of flow.metadata set by the addon.
SESSION_KEY = "webarena_live.session"
SKIP_KEY = "webarena_live.skip"
"""Flows answered by the addon itself (control API, 407 challenges): never events."""
CAPTURED_KEY = "webarena_live.captured"
CHALLENGED_KEY = "webarena_live.challenged"
"""CONNECTs this addon answered with a 407 itself: their failure is no upstream fault."""
BROWSER_KEY = "webarena_live.browser_service"
"""Requests and CONNECTs of the browser's own services, answered here (`proxy/browser_traffic.py`)."""


class ClientConnections:
    """The session of each open client connection, by its id; forgotten when the client disconnects."""

    def __init__(self, addresses: SessionAddresses, health: dict[str, Any]) -> None:
        self.addresses = addresses
        self.health = health
        """`/health`'s extra answer, where the refused strangers are counted."""
        self.session_port = 0
        self.named: dict[str, str] = {}
        """Session name by client connection id, for connections that sent credentials (CONNECT or
        first request)."""
        self.pinned: dict[str, str] = {}
        """Session name by client connection id, for connections accepted on a session's own address:
        the address's holder when the connection last sent a request (`session_of`)."""
        self.strangers: set[str] = set()
        """Pinned connections from clients the session does not let in (proxy/strangers.py)."""

    def on_session_port(self, flow: http.HTTPFlow) -> bool:
        sockname = flow.client_conn.sockname
        return bool(self.session_port) and len(sockname) > 1 and sockname[1] == self.session_port

    def take_credentials(self, flow: http.HTTPFlow) -> tuple[str | None, str | None]:
        """(username, problem) from the request's proxy credentials, removing them before they go upstream;
        the name is remembered for the client connection."""
        username, problem = take_credentials(flow.request)
        if username is not None:
            self.named[flow.client_conn.id] = username
        return username, problem

    def claim(self, flow: http.HTTPFlow) -> tuple[str | None, str | None] | None:
        """The one decision of whose `flow` (a CONNECT or a request) is: (session name, why its
        credentials name none), the name None when nothing names one; None when it came from a stranger
        (answered 407 here). A pinned connection is its address's holder's, its credentials (if any)
        taken off and naming nothing; any other is named by its credentials, else by those its
        connection sent before (a request inside a tunnel: the CONNECT's)."""
        pinned = self.session_of(flow.client_conn) if self.pinned else None
        if pinned is not None:
            if self.strangers and self.stranger(flow, pinned):
                return None
            take_credentials(flow.request)
            return pinned, None
        username, problem = self.take_credentials(flow)
        return (username if username is not None else self.named.get(flow.client_conn.id)), problem

    def connected(self, client: connection.Client) -> None:
        if self.addresses.by_port:
            name = self.addresses.by_port.get(client.sockname[1])
            if name is not None:
                self.pinned[client.id] = name
                if self.addresses.guarded and not self.addresses.guests.lets_in(name, client.peername[0]):
                    self.strangers.add(client.id)  # in once it sends the session's secret

    def session_of(self, client: connection.Client) -> str | None:
        """The session a request on `client` belongs to when the connection is pinned (None: it is not):
        its address's holder now. A connection kept open from an earlier holder passes to the new one
        (and is checked as the new one's client beyond loopback)."""
        name = self.pinned.get(client.id)
        if name is None:
            return None
        holder = self.addresses.by_port.get(client.sockname[1])
        if holder is None or holder == name:
            return name  # still its session's, or nobody's now: the last holder's (its late events)
        self.pinned[client.id] = holder
        self.strangers.discard(client.id)
        if self.addresses.guarded and not self.addresses.guests.lets_in(holder, client.peername[0]):
            self.strangers.add(client.id)
        return holder

    def disconnected(self, client: connection.Client) -> None:
        self.named.pop(client.id, None)
        self.pinned.pop(client.id, None)
        self.strangers.discard(client.id)

    def stranger(self, flow: http.HTTPFlow, name: str) -> bool:
        """Whether `flow` came from a client the session's address does not let in (then answered 407)."""
        client = flow.client_conn.id
        if client not in self.strangers:
            return False
        guests = self.addresses.guests
        if guests.knows_secret(name, flow.request.headers.get(PROXY_AUTHORIZATION)):
            self.strangers.discard(client)
            return False
        guests.refused += 1
        self.health["refused_strangers"] = guests.refused
        logger.warning("webarena-live: refused a stranger on session %s's address: %s",
                       name, flow.client_conn.peername[0])  # fmt: skip
        flow.metadata[SKIP_KEY] = flow.metadata[CHALLENGED_KEY] = True
        flow.response = challenge(f"session {name}'s address: its own clients only, or its secret")
        return True
