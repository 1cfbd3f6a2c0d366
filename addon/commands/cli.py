"""`webarena-live` command line: serve, evaluate, demo, addon-path.

Argument parsing only; each subcommand's work lives in its own module and is
imported when the subcommand runs, so `--help` stays fast.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from webarena_live.evaluator import __version__


class _Parser(argparse.ArgumentParser):
    """Wrong arguments give one line naming the problem (not the whole usage) and exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port out of range 0-65535: {value}")
    return value


def _task_ids(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"task ids must be comma-separated integers: {text!r}") from None


def _add_dataset_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tasks",
        metavar="PATH",
        help="dataset file in WebArena-Verified format, or 'webarena-verified' (the official 812 tasks) or "
        "'webarena-verified-hard' (its 258-task hard subset) from the installed reference package "
        "(serve's default: the embedded demo tasks)",
    )
    parser.add_argument(
        "--config",
        metavar="PATH",
        help='site map in the reference format: {"environments": {"__SHOPPING__": {"urls": ["http://..."]}}}',
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="webarena-live",
        description="Evaluate web agents live, through a proxy, the way WebArena-Verified evaluates them.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = commands.add_parser(
        "serve", help="run the evaluating proxy", description="Run the evaluating proxy."
    )
    _add_dataset_options(serve)
    serve.add_argument(
        "--output-dir",
        metavar="DIR",
        help="write OUT/<task_id>/{agent_response.json,network.har,eval_result.json}",
    )
    serve.add_argument(
        "--port", type=_port, default=8080, help="proxy port; credentials optional (default: 8080)"
    )
    serve.add_argument(
        "--session-port",
        type=_port,
        default=8082,
        help="proxy port that always asks for credentials (default: 8082)",
    )
    serve.add_argument("--control-port", type=_port, default=8081, help="control API port (default: 8081)")
    serve.add_argument(
        "--listen-host",
        default="127.0.0.1",
        metavar="HOST",
        help="address the proxy ports bind to (default: 127.0.0.1)",
    )
    serve.add_argument(
        "--control-host",
        default="127.0.0.1",
        metavar="HOST",
        help="address the control port binds to (default: 127.0.0.1)",
    )
    serve.add_argument(
        "--control-token",
        metavar="TOKEN",
        # From the environment too, so the token need not show in the process list.
        default=os.environ.get("WEBARENA_LIVE_CONTROL_TOKEN") or None,
        help="require 'Authorization: Bearer TOKEN' on every control route but /health and /openapi.json, "
        "on the control port and through the proxy (default: $WEBARENA_LIVE_CONTROL_TOKEN, else none)",
    )
    serve.add_argument(
        "--redact",
        action="store_true",
        help="leave cookies, Authorization headers and form passwords out of network.har and the journal "
        "(off by default: some official tasks check cookies, and a redacted HAR cannot prove them)",
    )
    serve.add_argument(
        "--no-gc-tuning",
        dest="gc_tuning",
        action="store_false",
        help="leave Python's garbage collector at its defaults (no start-up heap freeze, no collection "
        "after large bodies, collections during a finish); for benchmarks",
    )
    serve.add_argument(
        "--web",
        action="store_true",
        help="show the flows in mitmweb (mitmproxy's web UI, on 127.0.0.1:--web-port), each commented with "
        "its session and event type, and marked when it satisfies a network evaluator",
    )
    serve.add_argument(
        "--web-port", type=_port, default=8083, help="mitmweb's port with --web (default: 8083)"
    )
    serve.add_argument(
        "--quiet",
        action="store_true",
        help="print only the banner, warnings and errors (not a line per session start, finish and refusal)",
    )
    serve.add_argument(
        "--set",
        dest="mitmproxy_options",
        action="append",
        default=[],
        metavar="OPTION=VALUE",
        help="pass an option to mitmproxy, e.g. --set ssl_insecure=true (repeatable)",
    )

    evaluate = commands.add_parser(
        "evaluate",
        help="evaluate recorded runs offline",
        description="Evaluate every DIR/<task_id>/ holding agent_response.json and network.har; "
        "write DIR/<task_id>/eval_result.json and print a summary.",
    )
    evaluate.add_argument("--output-dir", metavar="DIR", required=True, help="run directory to evaluate")
    _add_dataset_options(evaluate)
    evaluate.add_argument("--task-ids", type=_task_ids, metavar="1,2,3", help="only these task ids")

    demo = commands.add_parser(
        "demo",
        help="run the embedded demo end to end",
        description="Start the demo site and the proxy, drive headless Chromium through the demo tasks "
        "and print the verdicts.",
    )
    demo.add_argument(
        "--output-dir", metavar="DIR", help="where to leave the outputs (default: a new temp dir)"
    )
    demo.add_argument(
        "--chromium",
        metavar="PATH",
        default="/usr/bin/chromium",
        help="Chromium binary (default: /usr/bin/chromium)",
    )
    commands.add_parser(
        "addon-path",
        help="print the path of the script that loads the addon into plain mitmproxy",
        description="Print the path of the addon script inside the installed package, for "
        '`mitmdump -s "$(webarena-live addon-path)" --set webarena_tasks=...`.',
    )
    return parser


def addon_path() -> str:
    """The file plain mitmproxy loads with `-s` (`addon/entry.py` inside the installed package)."""
    from importlib.util import find_spec

    spec = find_spec("webarena_live.addon.entry")
    assert spec is not None and spec.origin is not None, "webarena_live.addon.entry is part of the package"
    return spec.origin


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "serve":
        from webarena_live.addon.commands.serve import run as run_serve

        return run_serve(args)
    if args.command == "evaluate":
        from webarena_live.addon.commands.evaluate import run as run_evaluate

        return run_evaluate(args)
    if args.command == "addon-path":
        print(addon_path())
        return 0
    from webarena_live.addon.demo.command import run as run_demo

    return run_demo(args)


if __name__ == "__main__":
    sys.exit(main())
