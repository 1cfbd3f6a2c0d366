"""No stranger in: who may send through a session's own address once it listens beyond loopback.

On loopback only this machine's programs reach a session's address. On any other address anyone on
the network could send traffic into another agent's session (and see its sites' answers), so there:
the control API needs a token (`exposure_problem`: `serve` refuses to start without one), and a
session's address lets in only the client address that opened the session (`POST /sessions`; through
the front of `serve --workers`, the address the front saw), the `near` address given at its start,
or a client that sends the session's secret (`POST /sessions` answers it) as proxy credentials
(`http://<session>:<secret>@host:port`). Anything else is answered 407 and counted (`/health`,
`refused_strangers`). See docs/architecture.md, Workers.
"""

from __future__ import annotations

import binascii
import hmac
import ipaddress
import secrets
import socket

LOOPBACK_NAMES = frozenset({"localhost"})


def beyond_loopback(host: str) -> bool:
    """Whether listening on `host` reaches beyond this machine (every address, or a non-loopback one)."""
    if host in LOOPBACK_NAMES:
        return False
    try:
        address = ipaddress.ip_address(host.strip("[]") or "0.0.0.0")
    except ValueError:
        try:
            address = ipaddress.ip_address(socket.gethostbyname(host))
        except (OSError, ValueError):
            return True
    return not address.is_loopback


def exposure_problem(
    *, listen_host: str, control_host: str, control_port: int, token: str | None
) -> str | None:
    """Why `serve` must not start as configured (a listener beyond loopback and no control token), or None."""
    if token:
        return None
    exposed = [f"--listen-host {listen_host}"] if beyond_loopback(listen_host) else []
    if control_port and beyond_loopback(control_host):
        exposed.append(f"--control-host {control_host}")
    if not exposed:
        return None
    return (
        f"{' and '.join(exposed)} listen beyond loopback, where anyone on the network could drive or "
        "finish sessions: give a control token (--control-token, or WEBARENA_LIVE_CONTROL_TOKEN)"
    )


class Guests:
    """Who may use each session's address: its clients' addresses and its secret."""

    def __init__(self) -> None:
        self.allowed: dict[str, frozenset[str]] = {}
        self.secrets: dict[str, str] = {}
        self.refused = 0
        """Requests from strangers answered 407 so far."""

    def admit(self, session: str, *clients: str | None) -> str:
        """Let `clients` (addresses; None and names that are not addresses are skipped) use the
        session's address; the session's secret (kept across a restart of the session)."""
        known = {_normal(client) for client in clients if client}
        self.allowed[session] = frozenset(self.allowed.get(session, frozenset()) | (known - {""}))
        return self.secrets.setdefault(session, secrets.token_urlsafe(18))

    def forget(self, session: str) -> None:
        self.allowed.pop(session, None)
        self.secrets.pop(session, None)

    def lets_in(self, session: str, client: str) -> bool:
        return _normal(client) in self.allowed.get(session, frozenset())

    def knows_secret(self, session: str, proxy_authorization: str | None) -> bool:
        """Whether `Proxy-Authorization` carries `session:<its secret>`."""
        secret = self.secrets.get(session)
        if not secret or not proxy_authorization:
            return False
        scheme, _, encoded = proxy_authorization.strip().partition(" ")
        if scheme.lower() != "basic":
            return False
        try:
            decoded = binascii.a2b_base64(encoded.strip().encode("ascii")).decode("utf-8", "replace")
        except (binascii.Error, UnicodeEncodeError):
            return False
        username, _, password = decoded.partition(":")
        return username == session and hmac.compare_digest(password.encode(), secret.encode())


def _normal(address: str) -> str:
    """An address as peers are named: IPv4-mapped IPv6 as IPv4; '' when it is no address."""
    try:
        parsed = ipaddress.ip_address(address.strip("[]"))
    except ValueError:
        return ""
    if isinstance(parsed, ipaddress.IPv6Address) and parsed.ipv4_mapped is not None:
        return str(parsed.ipv4_mapped)
    return str(parsed)
