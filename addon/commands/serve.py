"""`webarena-live serve`: mitmproxy's DumpMaster with the addon, two proxy ports and the control port.

The proxy port never asks for credentials; the session port always does
(docs/architecture.md, Capture). Both are plain `regular` modes of one mitmproxy, told apart by
the port a client connected to. mitmproxy's own per-flow console output is
off (the dumper is not loaded) and its log shows warnings only; the addon
prints one banner once everything listens.

The process is `serve`'s own, so it also applies the process-wide
garbage-collection policy of addon/commands/process_memory.py (`--no-gc-tuning` leaves
Python's defaults), which the addon never does itself.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import secrets
import signal
import sys
from pathlib import Path
from typing import Any

from mitmproxy import ctx, exceptions, options
from mitmproxy.master import Master
from mitmproxy.tools.dump import DumpMaster

from webarena_live.addresses.credentials import WEB_TOKEN_ENV, mitmweb_url
from webarena_live.commands.ports import resolve_ports
from webarena_live.commands.process_memory import ProcessMemory, gc_paused
from webarena_live.control.context import RESERVED_HOST
from webarena_live.evaluator import __version__
from webarena_live.proxy.addon import WebArenaLive
from webarena_live.proxy.kept_listeners import adopt_kept_listeners
from webarena_live.proxy.options import advertise_host_problem, options_from_flags
from webarena_live.proxy.strangers import exposure_problem
from webarena_live.runs.fault_plan import plan_line


def proxy_modes(*, port: int, session_port: int) -> list[str]:
    """mitmproxy `mode` values: the proxy port, plus the session port when there is one."""
    modes = [f"regular@{port}"]
    if session_port:
        modes.append(f"regular@{session_port}")
    return modes


def addon_options(args: argparse.Namespace) -> dict[str, Any]:
    """The addon's options (`webarena_*`) from the `serve` command line."""
    options = options_from_flags(args)
    options["webarena_annotate_flows"] = bool(getattr(args, "web", False))
    return options


WEB_COLUMNS = ["tls", "icon", "path", "method", "status", "size", "time", "comment"]
"""mitmweb's default columns and the comment, where each flow says its session and event type."""


def web_options(args: argparse.Namespace) -> dict[str, Any]:
    """mitmweb's options with `--web`: loopback only (it shows every flow, credentials included), no
    browser opened (serve runs on machines without one), the comment column shown, and the session
    port's 407 challenges left out of the list (a browser's every first request gets one: they would
    double the list and are no event). `listen_port` is what mitmweb's status bar names as the proxy's
    address (it does not read the modes)."""
    return {
        "web_host": "127.0.0.1",
        "web_port": args.web_port,
        "web_open_browser": False,
        "web_columns": WEB_COLUMNS,
        "view_filter": "!~c 407",
        "listen_port": args.port,
    }


def web_password(opts: options.Options) -> tuple[str | None, dict[str, Any]]:
    """mitmweb's token and the option that sets it. mitmproxy 11.1 and later ask mitmweb's visitors
    for a token or password (`web_password`; 11.0 has no such option and asks for nothing). The
    token is the front's (`--workers`: its banner names the workers' addresses), else a new one.
    The option gets an argon2 hash (a plain password is logged as a warning), a cheap one: the token
    is 128 random bits, and mitmweb checks every request that has no auth cookie yet."""
    if "web_password" not in opts:
        return None, {}
    import argon2  # mitmproxy's own dependency wherever mitmweb has a password

    token = os.environ.get(WEB_TOKEN_ENV) or secrets.token_hex(16)
    hashed = argon2.PasswordHasher(time_cost=1, memory_cost=1024, parallelism=1).hash(token)
    return token, {"web_password": hashed}


class Banner:
    """Prints where everything listens, once the proxy and the control port are up."""

    def __init__(self, live: WebArenaLive, args: argparse.Namespace, web_token: str | None = None) -> None:
        self.live = live
        self.args = args
        self.web_token = web_token

    def running(self) -> None:
        if ctx.options.webarena_front:
            return  # a worker of `serve --workers`: the front prints the banner
        context = self.live.context
        if context is None or (ctx.options.webarena_control_port and self.live.server is None):
            return  # startup failed (the error is logged and mitmproxy is about to exit)
        host, args = self.args.listen_host, self.args
        lines = [
            f"webarena-live {__version__}: {len(context.tasks)} tasks from {context.tasks.source}",
            f"  proxy port    http://{host}:{args.port}  (credentials optional; none: session 'default')",
        ]
        if ctx.options.webarena_session_port:
            lines.append(
                f"  session port  http://{host}:{args.session_port}  (asks for credentials: "
                f"http://<session>:<any>@{host}:{args.session_port})"
            )
        server = self.live.server
        control = f"http://{server.host}:{server.port}/ and " if server is not None else ""
        lines.append(f"  control API   {control}http://{RESERVED_HOST}/ through the proxy")
        if (faults := self.live.extra_health.get("faults")) is not None:
            lines.append(plan_line(faults))
        if getattr(args, "web", False):
            lines.append(
                f"  mitmweb       {mitmweb_url(args.web_port, self.web_token)}  "
                "(flows with session, event, evaluator)"
            )
        if context.output_dir is not None:
            lines.append(f"  outputs       {context.output_dir}")
        lines.append(f"  journal       {context.settings.journal_dir}")
        if context.site_map.environments:
            for name, urls in context.site_map.urls.items():
                lines.append(f"  site          {name} = {', '.join(urls)}")
        else:
            lines.append("  sites         none mapped (--config); task URLs keep their placeholders")
        if (leases := context.authority.banner(confine=ctx.options.webarena_confine)) is not None:
            lines.append(leases)
        confdir = Path(ctx.options.confdir).expanduser()
        lines.append(f"  HTTPS CA      {confdir / 'mitmproxy-ca-cert.pem'}")
        print("\n".join(lines), flush=True)


async def serve(args: argparse.Namespace) -> int:
    # mitmdump lowers the root logger to DEBUG; this process keeps Python's WARNING for everyone else
    # and lets webarena-live's own lines (session start, finish, refusal) through to the terminal log.
    logging.getLogger("webarena_live").setLevel(logging.INFO)
    adopt_kept_listeners()  # a worker of `serve --workers`: its parent keeps its listeners across restarts
    opts = options.Options()
    web = bool(getattr(args, "web", False))
    # mitmweb keeps every flow in memory for its UI: fine for watching a run, not for long benchmarks.
    master: Master
    web_token: str | None = None
    web_auth: dict[str, Any] = {}
    if web:
        from mitmproxy.tools.web.master import WebMaster  # tornado and the UI: only when asked for

        master = WebMaster(opts, with_termlog=True)
        web_token, web_auth = web_password(opts)
    else:
        master = DumpMaster(opts, with_termlog=True, with_dumper=False)
    live = WebArenaLive()
    live.extra_health.update(proxy_port=args.port, session_port=args.session_port or None)
    if web:
        live.extra_health["web_port"] = args.web_port
    banner = Banner(live, args, web_token)
    # serve's addons ride on the live addon's one entry in mitmproxy's chain: mitmproxy dispatches
    # every event of every flow to each entry of its chain, so each entry more costs every flow.
    if args.gc_tuning:
        memory = ProcessMemory()
        live.addons.append(memory)
        live.flow_done = memory.count_bodies
        live.finish_guard = gc_paused  # the agent waits on a finish; a collection can run right after
        live.extra_health["memory"] = memory.stats
    live.addons.append(banner)  # last: its `running` prints what the others opened
    master.addons.add(live)
    try:
        opts.update(
            listen_host=args.listen_host,
            mode=proxy_modes(port=args.port, session_port=args.session_port),
            # One line per session start, finish and refused request (info); --quiet keeps warnings only.
            termlog_verbosity="warn" if args.quiet else "info",
            **addon_options(args),
            **(web_options(args) if web else {}),
            **web_auth,
        )
        if args.mitmproxy_options:
            opts.set(*args.mitmproxy_options)
            if web_auth and opts.web_password != web_auth["web_password"]:
                banner.web_token = None  # `--set web_password=...`: the user's own password, not shown
        if live.context is None:  # nothing differed from the defaults, so configure never ran
            live.configure(set(opts.keys()))
    except exceptions.OptionsError as error:
        for line in str(error).splitlines():
            print(f"webarena-live serve: {line}", file=sys.stderr)
        return 2

    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, master.shutdown)
    # mitmproxy handles the loop's errors while it runs and gives this handler back when it stops,
    # before asyncio.run cancels what is left.
    loop.set_exception_handler(_quiet_cancellations)
    await master.run()
    return 0


def _quiet_cancellations(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """The event loop's error handler after the proxy stopped: asyncio.run then cancels the task of
    every client connection still open (a keep-alive browser), and asyncio's stream protocol reports
    each of those cancellations with a traceback (plain mitmdump prints them too). Nothing went
    wrong, so they are left out; any other error is reported as usual."""
    if isinstance(context.get("exception"), asyncio.CancelledError):
        return
    loop.default_exception_handler(context)


def run(args: argparse.Namespace) -> int:
    """Entry point of `webarena-live serve`; returns the process exit status."""
    if problem := resolve_ports(args):
        print(f"webarena-live serve: {problem}", file=sys.stderr)
        return 2
    options = options_from_flags(args)
    if problem := advertise_host_problem(options["webarena_advertise_host"]):
        print(f"webarena-live serve: --advertise-host: {problem}", file=sys.stderr)
        return 2
    if problem := exposure_problem(
        listen_host=args.listen_host, control_host=options["webarena_control_host"],
        control_port=options["webarena_control_port"], token=options["webarena_control_token"] or None,
    ):  # fmt: skip
        print(f"webarena-live serve: {problem}", file=sys.stderr)
        return 2
    if args.workers > 1 or args.ray:
        from webarena_live.commands.serve_workers import run as run_workers

        return run_workers(args, args.workers)
    try:
        return asyncio.run(serve(args))
    except SystemExit as exit_:  # mitmproxy exits this way when a port cannot be bound
        return exit_.code if isinstance(exit_.code, int) else 1
    except KeyboardInterrupt:
        return 130
