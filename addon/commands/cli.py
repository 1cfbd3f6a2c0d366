"""`webarena-live` command line: serve, evaluate, report, verify, export, mcp, demo, addon-path.

Argument parsing only; each subcommand's work lives in its own module and is
imported when the subcommand runs, so `--help` stays fast.
"""

from __future__ import annotations

import argparse
import difflib
import gc
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from webarena_live.commands.mcp import add_control_option
from webarena_live.commands.mcp import add_parser as add_mcp_parser
from webarena_live.commands.ports import port_number
from webarena_live.evaluator import __version__
from webarena_live.proxy.options import OPTIONS, AddonOption, flag_default, with_flags


class _Parser(argparse.ArgumentParser):
    """Wrong arguments give one line naming the problem (not the whole usage) and exit code 2; an
    unknown flag is told by the subcommand it was given to, with the closest flag it has."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

    def parse_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:  # type: ignore[override]
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            command = self._command_parser(getattr(parsed, "command", None)) or self
            command.error(unknown_arguments(command, extras))
        return parsed

    def _command_parser(self, name: str | None) -> argparse.ArgumentParser | None:
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction) and name in action.choices:
                parser: argparse.ArgumentParser = action.choices[name]
                return parser
        return None


def unknown_arguments(parser: argparse.ArgumentParser, extras: Sequence[str]) -> str:
    """What is wrong with `extras`, a flag's closest known spelling beside it."""
    known = [option for action in parser._actions for option in action.option_strings]
    told = []
    for extra in extras:
        if extra.startswith("-"):
            close = difflib.get_close_matches(extra.split("=", 1)[0], known, n=1, cutoff=0.6)
            told.append(f"{extra} (did you mean {close[0]}?)" if close else extra)
        else:
            told.append(extra)
    return f"unrecognized arguments: {' '.join(told)}"


def _port(text: str) -> int:
    return port_number(text)


def _port_or_off(text: str) -> int:
    return port_number(text, may_be_off=True)


def _workers(text: str) -> int:
    """`--workers`: a number of processes, or `auto` for one per core this process may run on."""
    if text == "auto":
        return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    try:
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a number of workers or 'auto', not {text!r}") from None
    if not 1 <= count <= 256:
        raise argparse.ArgumentTypeError(f"between 1 and 256 workers, not {count}")
    return count


def _task_ids(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"task ids must be comma-separated integers: {text!r}") from None


def _add_option_flag(parser: argparse.ArgumentParser, option: AddonOption) -> None:
    """`serve`'s flag for an addon option (`proxy/options.py` declares both)."""
    flag, default = f"--{option.flag}", flag_default(option)
    if option.type is bool:
        parser.add_argument(flag, action="store_true", help=option.flag_help)
    elif option.type is int:
        parser.add_argument(flag, type=_port_or_off, default=default, help=option.flag_help)
    else:
        parser.add_argument(flag, metavar=option.metavar, default=default, help=option.flag_help)


def _add_dataset_options(parser: argparse.ArgumentParser) -> None:
    for option in OPTIONS:
        if option.name in ("webarena_tasks", "webarena_config"):
            _add_option_flag(parser, option)


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
    serve.add_argument(
        "--port",
        type=_port,
        default=8080,
        help="proxy port; credentials optional (0: any free port; default: 8080)",
    )
    serve.add_argument(
        "--listen-host",
        default="127.0.0.1",
        metavar="HOST",
        help="address the proxy ports bind to (default: 127.0.0.1)",
    )
    for option in with_flags():
        _add_option_flag(serve, option)
    serve.add_argument(
        "--workers",
        type=_workers,
        default=1,
        metavar="N",
        help="proxy processes behind the one control port ('auto': one per core; default: 1); each session "
        "lives on one worker, placed on the one with the fewest running sessions",
    )
    serve.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="run the workers as Ray actors spread over a Ray cluster's nodes ('auto': the cluster this "
        "machine is in, as ray.init does; needs pip install 'webarena-live[ray]'); the control API, "
        "dashboard and outputs stay on this process",
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
        "--web-port",
        type=_port,
        default=8083,
        help="mitmweb's port with --web (0: any free port; default: 8083)",
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

    report = commands.add_parser(
        "report",
        # argparse formats a `help` with %, so its percent sign is written %%; a `description` is printed
        # as it is written.
        help="a whole run in figures: success by site, action and template, with 95%% intervals",
        description="Report a run directory in the reference's layout (DIR/<task_id>/eval_result.json, "
        "earlier attempts in DIR/.attempts/<task_id>/<n>/): every attempt counts, success per attempt with "
        "its 95% interval (Wilson) and per task (any, all, mean of its attempts), overall, by site, action "
        "and intent template (and the official hard subset), errors and environment problems apart, the "
        "failing checks and why; with --vs, the paired comparison with another run (flips, difference, "
        "exact McNemar test).",
    )
    report.add_argument("directory", metavar="DIR", help="run directory to report")
    report.add_argument("--vs", metavar="OTHER_DIR", help="compare with this run of the same tasks")
    report.add_argument("--json", action="store_true", help="print every figure as JSON instead of tables")
    report.add_argument(
        "--html", metavar="FILE", help="also write a self-contained HTML page, charts included"
    )
    _add_dataset_options(report)

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
    _add_reward_commands(commands)
    _add_sites_command(commands)
    add_mcp_parser(commands)
    commands.add_parser(
        "addon-path",
        help="print the path of the script that loads the addon into plain mitmproxy",
        description="Print the path of the addon script inside the installed package, for "
        '`mitmdump -s "$(webarena-live addon-path)" --set webarena_tasks=...`.',
    )
    return parser


def _add_reward_commands(commands: Any) -> None:
    """`verify` and `export harbor`: Harbor's verifier and task folders (rewards/harbor.py)."""
    verify = commands.add_parser(
        "verify",
        help="write a session's reward where Harbor reads it (reward.txt, reward.json)",
        description="Finish the session with the agent's answer file (or read the verdict of a finished "
        "session) and write reward.txt and reward.json into --out. A session that cannot be judged, or "
        "whose verdict is masked, writes no reward file and exits 1 with the reason.",
    )
    verify.add_argument("--session", required=True, metavar="S", help="the session to judge")
    verify.add_argument(
        "--answer",
        metavar="FILE",
        help="the agent's final response (JSON, or text); without it the session must be finished already",
    )
    add_control_option(verify)
    verify.add_argument(
        "--keep-site-errors",
        action="store_true",
        help="write the verdict's score even when the task's sites answered failures (500, 502-504, no "
        "connection) in the session; by default such a reward is masked (site_errors)",
    )
    verify.add_argument(
        "--out",
        metavar="DIR",
        help="where to write (default: /logs/verifier where it exists, as inside Harbor's container; "
        "else the current directory)",
    )
    export = commands.add_parser(
        "export", help="export tasks for a training framework", description="Export tasks for a framework."
    )
    formats = export.add_subparsers(
        dest="format", required=True, metavar="FORMAT", help="what to export for: harbor"
    )
    harbor = formats.add_parser(
        "harbor",
        help="a Harbor task folder per task",
        description="Write DIR/webarena-live-<task_id>/ (instruction.md, task.toml, environment/, "
        "<task>/tests/test.sh) for each task of the dataset.",
    )
    harbor.add_argument(
        "--tasks",
        metavar="PATH",
        help="a dataset file, 'webarena-verified' or 'webarena-verified-hard' "
        "(default: the embedded demo tasks)",
    )
    harbor.add_argument("--out", metavar="DIR", required=True, help="where to write the task folders")
    harbor.add_argument("--task-ids", type=_task_ids, metavar="1,2,3", help="only these task ids")
    harbor.add_argument(
        "--image", default="python:3.12-slim", help="the environment's base image (default: python:3.12-slim)"
    )
    harbor.add_argument(
        "--requirement",
        metavar="SPEC",
        help="install webarena-live in the environment from this pip requirement (default: from its wheel, "
        "written beside the tasks and into each task's environment/)",
    )
    harbor.add_argument(
        "--control",
        default="http://host.docker.internal:8081",
        metavar="URL",
        help="the control API as seen from the task's container, unless $WEBARENA_LIVE_CONTROL is set "
        "on the Harbor host (default: http://host.docker.internal:8081)",
    )


def _add_sites_command(commands: Any) -> None:
    """`sites up|status|down`: the site map's container copies without `serve` (sites/copies.py)."""
    sites = commands.add_parser(
        "sites",
        help="make, show or remove the site map's container copies (entries with an image)",
        description="The copies of each site map entry that names an image and a number of replicas "
        "(docs/guides/official-dataset.md): `up` makes what is missing and adopts what runs under the "
        "copies' names, waiting until each is ready; `status` shows each copy as its engine sees it; `down` "
        "removes the copies and their own volumes. `serve` with the same map adopts what `up` made.",
    )
    sites.add_argument("action", choices=("up", "status", "down"), help="what to do with the copies")
    sites.add_argument("--config", metavar="PATH", required=True, help="the site map (reference's format)")
    sites.add_argument("--json", action="store_true", help="print the copies as JSON instead of lines")


def addon_path() -> str:
    """The file plain mitmproxy loads with `-s` (`addon/entry.py` inside the installed package)."""
    from importlib.util import find_spec

    spec = find_spec("webarena_live.entry")
    assert spec is not None and spec.origin is not None, "webarena_live.entry is part of the package"
    return spec.origin


def _serve(args: argparse.Namespace) -> int:
    # The start-up imports make tens of thousands of objects that live as long as the process; the cyclic
    # collector would walk them over and over as they come. With the tuning on (serve's own policy,
    # addon/commands/process_memory.py) it waits until they are in, and is back before anything listens.
    paused = args.gc_tuning and gc.isenabled()
    if paused:
        gc.disable()
    try:
        from webarena_live.commands.serve import run as run_serve
    finally:
        if paused:
            gc.enable()
    return run_serve(args)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "serve":
        return _serve(args)
    if args.command == "evaluate":
        from webarena_live.commands.evaluate import run as run_evaluate

        return run_evaluate(args)
    if args.command == "report":
        from webarena_live.commands.report import run as run_report

        return run_report(args)
    if args.command in ("verify", "export"):
        from webarena_live.commands.rewards import run_export, run_verify

        return run_verify(args) if args.command == "verify" else run_export(args)
    if args.command == "sites":
        from webarena_live.commands.sites import run as run_sites

        return run_sites(args)
    if args.command == "mcp":
        from webarena_live.commands.mcp import run as run_mcp

        return run_mcp(args)
    if args.command == "addon-path":
        print(addon_path())
        return 0
    from webarena_live.demo.command import run as run_demo

    return run_demo(args)


if __name__ == "__main__":
    sys.exit(main())
