"""Imported by every Python process a test starts (this folder is put on `PYTHONPATH` by
`tests/support/network_guard.py`): in a proxy under test, each name lookup or connection beyond
loopback is written down where the test run reads it.

Python raises an audit event for every name lookup (`socket.getaddrinfo`, `socket.gethostbyname`,
...) and every connect or datagram (`socket.connect`, `socket.sendto`), mitmproxy's upstream
connections and asyncio's resolver included; the hook below sees them all and, when the process is
a proxy (`webarena-live serve`, `mitmdump`, `mitmweb`), appends one JSON line per look-up or
connection to anything but loopback (or the networks named in the allow variable) to the log file,
then refuses it (an `OSError`, as a network that is not there would give): nothing leaves the
machine, and the test during which it was tried fails. Stdlib only, and nothing at all unless the
log variable is set.
"""

from __future__ import annotations

import errno
import ipaddress
import json
import os
import socket
import sys
import time

LOG_VARIABLE = "WEBARENA_TEST_NETWORK_LOG"
ALLOW_VARIABLE = "WEBARENA_TEST_ALLOWED_NETWORKS"
"""Comma-separated networks (`10.200.1.0/24`) beside loopback: the namespaces a test made itself."""

_LOOKUPS = ("socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyname_ex", "socket.gethostbyaddr")
_CONNECTS = ("socket.connect", "socket.sendto")
_LOOPBACK_NAMES = ("localhost", "localhost.", "ip6-localhost")


def _is_proxy() -> bool:
    """A proxy under test: `webarena-live serve` (not a `--ray` front: Ray's driver is not ours to
    judge, its workers' `serve` children are), `mitmdump` or `mitmweb`."""
    argv = list(getattr(sys, "orig_argv", sys.argv))
    if any(os.path.basename(arg) in ("mitmdump", "mitmweb") for arg in argv[:3]):
        return True
    return "serve" in argv and "--ray" not in argv and any("webarena" in arg for arg in argv[:3])


def _allowed(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if ip.is_loopback or ip.is_unspecified:
        return True
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return _allowed(str(ip.ipv4_mapped))
    nets = [part.strip() for part in os.environ.get(ALLOW_VARIABLE, "").split(",") if part.strip()]
    return any(ip in ipaddress.ip_network(net, strict=False) for net in nets)


def _name_allowed(host: object) -> bool:
    if host is None or host == "" or host == b"":
        return True
    name = host.decode("ascii", "replace") if isinstance(host, bytes) else str(host)
    name = name.lower()
    return name in _LOOPBACK_NAMES or name.endswith(".localhost") or _allowed(name)


def _beyond_loopback(event: str, args: tuple[object, ...]) -> str | None:
    """What `event` reached for, when it is beyond loopback; None otherwise."""
    if event in _LOOKUPS:
        return None if _name_allowed(args[0] if args else None) else f"{event} {args[0]!r}"
    sock, address = (*args, None, None)[:2]
    if not isinstance(sock, socket.socket) or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return None  # a Unix socket, netlink: no network
    if not isinstance(address, tuple) or not address:
        return None
    return None if _name_allowed(address[0]) else f"{event} {address[0]}:{address[1]}"


def _hook(event: str, args: tuple[object, ...]) -> None:
    if not event.startswith("socket.") or (event not in _LOOKUPS and event not in _CONNECTS):
        return
    reached = _beyond_loopback(event, args)
    if reached is None or not _is_proxy():
        return
    record = {"pid": os.getpid(), "argv": " ".join(sys.argv[:6]), "reached": reached, "time": time.time()}
    handle = os.open(os.environ[LOG_VARIABLE], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(handle, (json.dumps(record) + "\n").encode())
    finally:
        os.close(handle)
    raise OSError(errno.ENETUNREACH, f"tests reach only loopback, not: {reached}")


if os.environ.get(LOG_VARIABLE):
    sys.addaudithook(_hook)
