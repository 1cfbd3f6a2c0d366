"""The addon's options, declared once.

`WebArenaLive.load()` adds each to mitmproxy (`--set webarena_...=...` for
plain mitmdump users); `webarena-live serve` declares a flag for those that
name one and turns its command line into options with `options_from_flags`.
Imports nothing heavy: the CLI reads this table to build `--help`.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from webarena_live.addresses.credentials import CONTROL_TOKEN_ENV

BODY_CAP = 256 * 1024
"""Bytes of a request or response body an event keeps by default (`webarena_body_cap`)."""


@dataclass(frozen=True, slots=True)
class AddonOption:
    name: str
    type: type
    default: Any
    help: str
    """For mitmproxy (`--set`, `mitmdump --options`)."""
    flag: str | None = None
    """The `webarena-live serve` flag that sets it (without its dashes), if any."""
    flag_help: str = ""
    """That flag's `--help` text: it speaks of `serve`, where the option's help speaks of mitmproxy."""
    metavar: str | None = None
    reconfigures: bool = True
    """Changing it while the proxy runs reloads the tasks and settings (the control port's options
    only take effect at start)."""

    @property
    def dest(self) -> str | None:
        return self.flag.replace("-", "_") if self.flag else None


TASKS_HELP = (
    "dataset file in WebArena-Verified format, or 'webarena-verified' (the official 812 tasks) or "
    "'webarena-verified-hard' (its 258-task hard subset) from the installed reference package, or "
    "'demo' (the embedded demo tasks: serve's default)"
)
CONFIG_HELP = 'site map in the reference format: {"environments": {"__SHOPPING__": {"urls": ["http://..."]}}}'

OPTIONS = (
    AddonOption(
        "webarena_tasks", str, "",
        "Task file in WebArena-Verified format, or 'webarena-verified' for the official dataset "
        "(default: the embedded demo tasks).",
        flag="tasks", flag_help=TASKS_HELP, metavar="PATH",
    ),
    AddonOption(
        "webarena_config", str, "",
        'Site map: {"environments": {"__SHOPPING__": {"urls": ["http://..."]}}}.',
        flag="config", flag_help=CONFIG_HELP, metavar="PATH",
    ),
    AddonOption(
        "webarena_output_dir", str, "",
        "Write OUT/<task_id>/{agent_response.json,network.har,eval_result.json} when a session finishes.",
        flag="output-dir", flag_help="write OUT/<task_id>/{agent_response.json,network.har,eval_result.json}",
        metavar="DIR",
    ),
    AddonOption(
        "webarena_journal_dir", str, "",
        "Where each session run's events are journaled as JSON lines (default: OUT/.journal, or a "
        "directory in the system temp dir).",
    ),
    AddonOption(
        "webarena_session_port", int, 8082,
        "The listen port whose clients are always asked (407) for proxy credentials; add it with "
        "--mode regular@PORT.",
        flag="session-port",
        flag_help="proxy port that always asks for credentials (0: any free port; off: none; default: 8082)",
    ),
    AddonOption(
        "webarena_session_ports", str, "",
        "Ports for the sessions' own proxy addresses, LO-HI (default: ports the operating system picks).",
        flag="session-ports", metavar="LO-HI",
        flag_help="ports for the sessions' own proxy addresses (POST /sessions answers one each, released "
        "when the session finishes), e.g. 20000-20999 (default: ports the operating system picks)",
    ),
    AddonOption(
        "webarena_front", str, "",
        "HOST:PORT of the control API of `serve --workers` when this proxy is one of its workers: "
        "control requests through the proxy go there.",
    ),
    AddonOption(
        "webarena_control_port", int, 8081,
        "Control API port (0: none; the reserved host through the proxy still answers).",
        flag="control-port", flag_help="control API port (0: any free port; off: none, the reserved host "
        "through the proxy still answers; default: 8081)", reconfigures=False,
    ),
    AddonOption(
        "webarena_control_host", str, "127.0.0.1", "Address the control API binds to.",
        flag="control-host", flag_help="address the control port binds to (default: 127.0.0.1)",
        metavar="HOST", reconfigures=False,
    ),
    AddonOption(
        "webarena_advertise_host", str, "",
        "The host a session's proxy address names (POST /sessions, proxy.pac) instead of the listen "
        "host: the address a client elsewhere (a container) reaches this machine by.",
        flag="advertise-host", metavar="HOST", reconfigures=False,
        flag_help="the host POST /sessions answers in each session's proxy address (and its proxy.pac), "
        "instead of the listen host: the address a container reaches this machine by, e.g. "
        "host.docker.internal or the bridge's address; pair it with --listen-host and --control-host "
        "that host can reach (default: the listen host)",
    ),
    AddonOption(
        "webarena_control_token", str, "",
        "When set, control requests need the header 'Authorization: Bearer <token>'.",
        flag="control-token", metavar="TOKEN",
        flag_help="require 'Authorization: Bearer TOKEN' on every control route but /health and "
        "/openapi.json, on the control port and through the proxy (default: "
        f"${CONTROL_TOKEN_ENV}, else none)",
    ),
    AddonOption(
        "webarena_redact", bool, False,
        "Leave cookies, Authorization headers and form passwords out of network.har and the journal "
        "(off by default: some official tasks check cookies, which a redacted HAR cannot prove to the "
        "reference evaluator).",
        flag="redact",
        flag_help="leave cookies, Authorization headers and form passwords out of network.har and the "
        "journal (off by default: some official tasks check cookies, and a redacted HAR cannot prove them)",
    ),
    AddonOption(
        "webarena_isolation", str, "",
        "Who may share a site's replica: none, readers or exclusive (default: readers when some site has "
        "two or more replicas, else none).",
        flag="isolation", metavar="none|readers|exclusive",
        flag_help="who may share a replica of a site: 'exclusive' one session at a time; 'readers' read-only "
        "tasks share a replica no mutating session holds; 'none' everyone (default: readers when some site "
        "has two or more replicas, else none). Under readers and exclusive a replica that received a "
        "mutation is reset through its reset_url before its next lease",
    ),
    AddonOption(
        "webarena_confine", bool, False,
        "Refuse (403) a session's requests to a replica it does not hold and to hosts that are no site of "
        "the map (without it they are counted and listed in the session).",
        flag="confine",
        flag_help="refuse (403) a session's requests to a replica it does not hold and to hosts outside the "
        "site map (without it they are counted and listed in the session)",
    ),
    AddonOption(
        "webarena_lease_timeout", str, "",
        "Seconds a session's lease of its replicas may stay idle (no request through it, no control call) "
        "before it ends (timeout); empty: never.",
        flag="lease-timeout", metavar="SECONDS",
        flag_help="seconds a session may stay idle (no request through it, no control call) before its lease "
        "ends (timeout): its replicas go back and its requests are refused; default: never",
    ),
    AddonOption(
        "webarena_reset_at_start", bool, False,
        "Reset every replica of the site map through its reset_url before the first lease (copies of "
        "unknown state). Without it, replicas a previous run on the same output directory left changed, "
        "resetting or out of service are reset before their first lease.",
        flag="reset-at-start",
        flag_help="reset every replica before the first lease (a run that begins on copies of unknown "
        "state); without it only those the last run on this output directory left changed are",
        reconfigures=False,
    ),
    AddonOption(
        "webarena_forward_browser_traffic", bool, False,
        "Forward the browser's own service requests (update and connectivity checks to hosts that are no "
        "site of the map) instead of answering them in the proxy; they never become events either way.",
        flag="forward-browser-traffic",
        flag_help="forward the browser's own service requests (update and connectivity checks, to hosts "
        "that are no site of the map) to the web; by default the proxy answers them itself, sends nothing "
        "on and looks nothing up (they are counted and listed in the session, never events)",
        reconfigures=False,
    ),
    AddonOption(
        "webarena_faults", str, "",
        "A fault file (JSON: seed and rules): faults made on purpose in the sessions' requests to the "
        "sites (latency, an error status, a dropped connection, a slow body), drawn reproducibly.",
        flag="faults", metavar="FILE",
        flag_help="make faults on purpose in the sessions' requests to the sites, as the fault FILE says "
        "(JSON: a seed and rules by site, path and method with a probability: latency, an error status "
        "with a page, a dropped connection or a slow body); the same seed and traffic give the same faults",
    ),
    AddonOption(
        "webarena_body_cap", int, BODY_CAP, "Largest request/response body kept in an event, in bytes."
    ),
    AddonOption(
        "webarena_annotate_flows", bool, False,
        "Comment each captured flow with its session and event type, and mark the flow satisfying a "
        "network evaluator (serve --web).",
        reconfigures=False,
    ),
)  # fmt: skip

RECONFIGURING = frozenset(option.name for option in OPTIONS if option.reconfigures)


_LABEL = r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOSTNAME = re.compile(rf"(?=.{{1,253}}$){_LABEL}(\.{_LABEL})*$")


def advertise_host_problem(host: str) -> str | None:
    """Why `host` cannot be `webarena_advertise_host` (a hostname or an IP address), or None. An
    unspecified address (0.0.0.0, ::) is refused: no client can reach a proxy by it."""
    if not host:
        return None
    try:
        address = ipaddress.ip_address(host.strip("[]") if host.startswith("[") else host)
    except ValueError:
        if _HOSTNAME.match(host) and not host.replace(".", "").isdigit():
            return None
        return f"{host!r} is not a hostname or an IP address"
    if address.is_unspecified:
        return f"{host} names no host a client can reach (give the address it uses to reach this one)"
    return None


def url_host(host: str) -> str:
    """`host` as the host of a URL (an IPv6 address in brackets)."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def with_flags() -> Iterator[AddonOption]:
    return (option for option in OPTIONS if option.flag is not None)


def flag_default(option: AddonOption) -> Any:
    """What `serve` passes when its flag is not given: the option's default, the control token from
    the environment (so it need not show in the process list), None for text (given or not)."""
    if option.name == "webarena_control_token":
        return os.environ.get(CONTROL_TOKEN_ENV) or None
    return None if option.type is str else option.default


def options_from_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The options `serve`'s flags set (a flag not on `args`, or given no value, keeps the default)."""
    values = {}
    for option in with_flags():
        value = getattr(args, option.dest or "", None)
        values[option.name] = option.default if value is None else option.type(value)
    return values
