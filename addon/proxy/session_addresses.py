"""A listening port per session, opened and closed while the proxy runs.

See docs/architecture.md, Workers. `POST /sessions` claims the session's address (a listener of its
own, `proxy/session_listeners.py`) before the session starts; every connection
accepted on that port belongs to the session, whatever credentials it carries, so a browser
launched with a bare `--proxy-server` needs nothing else. The port is released when the session
finishes; the connections still open then stay the session's (their late events are counted, not
kept, as for any finished session) until the address passes to another session: then they are the new
holder's (`ClientConnections.session_of`), so a browser started once for task after task loses nothing.
"""

from __future__ import annotations

import logging
from typing import Any

from mitmproxy import ctx, exceptions

from webarena_live.addresses.placement import Placement, PlacementError, PortRange
from webarena_live.control.bodies import ControlError
from webarena_live.proxy.kept_listeners import drop_kept_listener
from webarena_live.proxy.options import url_host
from webarena_live.proxy.session_listeners import SessionListeners
from webarena_live.proxy.strangers import Guests, beyond_loopback
from webarena_live.runs.sessions import STARTED, Session, SessionStore

logger = logging.getLogger(__name__)

WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "::"})


def address_host(listen_host: str) -> str:
    """The host a session's proxy URL names: the listen host, or loopback when it listens everywhere."""
    return "127.0.0.1" if listen_host in WILDCARD_HOSTS else listen_host


class SessionAddresses:
    """The sessions' own proxy ports in this mitmproxy: which port is whose, opened and closed."""

    def __init__(self) -> None:
        self.placement = Placement()
        self.by_port: dict[int, str] = {}
        """Session name by its own listening port; what `client_connected` reads."""
        self.store: SessionStore | None = None
        self.guests = Guests()
        self.guarded = False
        """They listen beyond loopback: only each session's own clients get in (proxy/strangers.py)."""
        self.listeners = SessionListeners()

    def attach(self, store: SessionStore) -> None:
        """Keep `store`'s sessions' `proxy` (this module is its one writer) and hear their notices: as a
        role, so capture publishes no notice per event for it (only watchers are told events)."""
        self.store = store
        store.notices.subscribe(self.on_notice, role="addresses")

    def configure(self, *, ports: str, reserved: frozenset[int]) -> None:
        """Take the `webarena_session_ports` range (`LO-HI`, empty: the operating system's ports)."""
        host = ctx.options.listen_host or "0.0.0.0"
        self.guarded = beyond_loopback(host)
        try:
            port_range = PortRange.parse(ports) if ports else None
        except PlacementError as error:
            raise exceptions.OptionsError(f"webarena_session_ports: {error}") from None
        held = self.placement.held_ports()
        self.placement = Placement(ports=port_range, host=host, reserved=reserved)
        for name, port in held.items():  # a reconfigured proxy keeps the addresses it handed out
            self.placement.place(name, port=port)

    def url(self, port: int) -> str:
        """The address `POST /sessions` answers: the advertised host (`webarena_advertise_host`, what a
        container reaches this machine by) when one is set, else the host it listens on."""
        host = ctx.options.webarena_advertise_host or address_host(ctx.options.listen_host)
        return f"http://{url_host(host)}:{port}"

    async def claim(
        self, session: str, port: int | None = None, *, client: str | None = None, near: str | None = None
    ) -> str | None:
        """The session's address, opened now unless it holds one (a restart keeps it); `port` asks for
        that port (a worker told by its front). A JSON 503 when none can be opened; None when this
        mitmproxy has no proxy server to listen with (the addon under mitmproxy's test context).
        Beyond loopback, `client` (the address that asked) and `near` may use it (and the secret)."""
        if ctx.master.addons.get("proxyserver") is None:
            return None
        if self.guarded:
            self.guests.admit(session, client, near)
        held = self.placement.port_of(session)
        if held is not None and port in (None, held):
            return self._attached(session, held)
        if held is not None:
            self.release(session)
        try:
            chosen = self.placement.place(session, port=port).port
        except PlacementError as error:  # AddressesExhausted among them
            raise ControlError(503, "no_address", str(error)) from None
        assert chosen is not None
        self.by_port[chosen] = session
        problem = await self.listeners.open(chosen)
        if problem:
            self.placement.release(session)
            self.by_port.pop(chosen, None)
            raise ControlError(503, "no_address", f"cannot listen on port {chosen}: {problem}")
        return self._attached(session, chosen)

    def _attached(self, name: str, port: int) -> str:
        """The address, written on the session when it exists already (a resumed one); a session
        started after its claim gets it with its start notice."""
        url = self.url(port)
        session = self.store.get(name) if self.store is not None else None
        if session is not None:
            session.proxy = url
        return url

    def secret_of(self, session: str) -> str | None:
        """The session's secret (its proxy credentials' password lets any client in), when guarded."""
        return self.guests.secrets.get(session) if self.guarded else None

    def release(self, session: str) -> None:
        self.guests.forget(session)
        port = self.placement.release(session)
        if port is None:
            return
        self.by_port.pop(port, None)
        drop_kept_listener(port)  # a worker's parent keeps no copy of it either
        self.listeners.close(port)

    def on_notice(self, session: Session, kind: str, payload: dict[str, Any] | None) -> None:
        """Subscribed to the sessions' notices: a started session holding a port gets its address (a
        finished session's is released by the control API's `SessionEnds`, with its lease)."""
        if kind == STARTED and (port := self.placement.port_of(session.name)) is not None:
            session.proxy = self.url(port)

    async def settle(self) -> None:
        """Wait until the listeners match the addresses held: a port released by a finish is closed
        once the finish answers, so the next session (on any worker) can listen on it."""
        await self.listeners.settle()
