"""`webarena-live mcp`: an agent's session as an MCP server (webarena_live.mcp_server), over stdio or
streamable HTTP, talking to a running `serve` through its control API.

The arguments are declared here (cli.py adds them); the server and the `mcp` SDK are imported only when
the command runs, and a missing SDK is said in one line with what to install.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from webarena_live.commands.ports import port_number

CONTROL_ENV = "WEBARENA_LIVE_CONTROL"
DEFAULT_CONTROL = "http://127.0.0.1:8081"
MISSING_SDK = (
    "webarena-live mcp needs the MCP SDK: pip install 'webarena-live[mcp]' (mcp 2.3, on Python 3.12 or "
    "newer: its HTTP stack needs an h11 that mitmproxy 11, the one Python 3.11 gets, does not take)"
)


def add_control_option(parser: argparse.ArgumentParser) -> None:
    """`--control URL`: the control API a client command talks to (`mcp`, `verify`)."""
    parser.add_argument(
        "--control",
        metavar="URL",
        help=f"the control API (default: ${CONTROL_ENV}, else {DEFAULT_CONTROL}); the token is read "
        "from $WEBARENA_LIVE_CONTROL_TOKEN",
    )


def add_parser(commands: Any) -> None:
    mcp = commands.add_parser(
        "mcp",
        help="serve an agent's session as an MCP server (its task, its final answer, its progress)",
        description="Serve one session of a running `webarena-live serve` as an MCP server, over stdio "
        "(the default: an MCP client starts it) or streamable HTTP: tools to get the task (intent, start "
        "URLs, the proxy address to browse through), submit the final answer (which finishes the session "
        "and answers the verdict), preview the verdict and see the progress. Needs pip install "
        "'webarena-live[mcp]'.",
    )
    mcp.add_argument(
        "--task",
        type=int,
        metavar="ID",
        help="start the session on this task when the server starts (POST /sessions); without it the "
        "server serves a session someone else started",
    )
    mcp.add_argument(
        "--session",
        metavar="S",
        help="the session's name (default: the API's own: the start names it, else 'default', the "
        "session of the proxy port's traffic without credentials)",
    )
    mcp.add_argument(
        "--restart",
        action="store_true",
        help="with --task: start the session again even when it is running with events (a new attempt)",
    )
    mcp.add_argument("--run", metavar="NAME", help="with --task: the run the session's outputs go to")
    add_control_option(mcp)
    mcp.add_argument(
        "--transport",
        choices=("stdio", "http"),
        default="stdio",
        help="stdio (default), or http: streamable HTTP on --host:--port at /mcp",
    )
    mcp.add_argument(
        "--host", default="127.0.0.1", help="with --transport http: the address to bind (default: 127.0.0.1)"
    )
    mcp.add_argument(
        "--port",
        type=port_number,
        default=8000,
        help="with --transport http: the port to listen on (default: 8000)",
    )


def run(args: argparse.Namespace) -> int:
    import anyio

    try:
        from webarena_live.mcp_server.server import Transport, serve
    except ImportError as error:
        if (error.name or "").split(".")[0] not in ("mcp", "mcp_types", "httpx2"):
            raise
        print(MISSING_SDK, file=sys.stderr)
        return 2
    from webarena_live.client import AsyncClient, token_from_env
    from webarena_live.mcp_server.tools import ToolRefusal

    if args.task is None and (args.restart or args.run):
        print(
            "webarena-live mcp: --restart and --run go with --task (the start they change)", file=sys.stderr
        )
        return 2
    control = args.control or os.environ.get(CONTROL_ENV) or DEFAULT_CONTROL
    start = {"restart": args.restart, "run": args.run}
    transport = Transport(args.transport, args.host, args.port)

    async def main() -> None:
        async with AsyncClient(control, token=token_from_env()) as client:
            await serve(client, transport, session=args.session, task_id=args.task, start=start)

    try:
        anyio.run(main)
    except ToolRefusal as refusal:
        print(f"webarena-live mcp: the session could not start: {refusal}", file=sys.stderr)
        return 1
    except OSError as error:  # the HTTP port taken
        print(f"webarena-live mcp: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    return 0
