"""`serve`'s listening ports as the command line gives them, made real before anything listens.

`0` asks the operating system for a free port (a test, a second proxy on one machine, a container);
`off` opens no session port or no control port. The banner and `/health` then name the ports in use,
never `0`. One port given for two uses is refused: it cannot both challenge for credentials and not,
or serve the proxy and the control API.

A port picked for `0` is free when `serve` starts, a moment before it binds it; a program that takes it
in between gets the same "cannot open" error a busy port given by number does.
"""

from __future__ import annotations

import argparse

OFF = -1
"""What `off` parses to; the addon's options then get 0, their own word for "none"."""


def port_number(text: str, *, may_be_off: bool = False) -> int:
    """A `--*-port` value: 0-65535, or `off` where a port may be left out."""
    if may_be_off and text.strip().lower() in ("off", "none"):
        return OFF
    try:
        value = int(text)
    except ValueError:
        also = " or 'off'" if may_be_off else ""
        raise argparse.ArgumentTypeError(f"not a port number{also}: {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port out of range 0-65535 (0: any free port): {value}")
    return value


def listening_ports(args: argparse.Namespace) -> list[tuple[str, str]]:
    """The flags of the ports `serve` opens itself, with the attribute each is parsed into."""
    flags = [("--port", "port"), ("--session-port", "session_port"), ("--control-port", "control_port")]
    if getattr(args, "web", False):
        flags.append(("--web-port", "web_port"))
    return flags


def resolve_ports(args: argparse.Namespace) -> str | None:
    """Give every `0` a free port of the listen host and every `off` the addon's 0, in place; what is
    wrong with the ports given, or None."""
    flags = listening_ports(args)
    given: dict[int, str] = {}
    for flag, attribute in flags:
        port = getattr(args, attribute)
        if port > 0 and port in given:
            return (
                f"{given[port]} and {flag} are both {port}: each needs a port of its own "
                "(0 lets the operating system pick one"
                + (f"; {flag} off opens none)" if flag in ("--session-port", "--control-port") else ")")
            )
        given.setdefault(port, flag)
    from webarena_live.launch import free_ports  # httpx and the client: not for the CLI's --help

    wanted = [attribute for _, attribute in flags if getattr(args, attribute) == 0]
    args.picked_ports = frozenset(wanted)  # `--workers` gives each worker's mitmweb a port of its own
    picked = free_ports(len(wanted), args.listen_host) if wanted else []
    for attribute, port in zip(wanted, picked, strict=True):
        setattr(args, attribute, port)
    for _, attribute in flags:
        if getattr(args, attribute) == OFF:
            setattr(args, attribute, 0)
    return None
