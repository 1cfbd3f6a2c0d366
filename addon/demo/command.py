"""`webarena-live demo`: the embedded demo, end to end, with no configuration.

It starts the Demo Shop (`demo/site.py`) and the evaluating proxy
(`webarena-live serve`, as a child process of this interpreter) on free local
ports, then drives headless Chromium through every demo task (tasks/demo.json)
with the scripted agent of `demo/agent.py`. Each task gets its own proxy
session, named by the proxy username on the session port, and its own browser
context. The agent's final response goes to `POST /sessions/{name}/finish`,
and the verdicts the proxy returns are printed as a table.

The output directory keeps what the proxy wrote per task (agent_response.json,
network.har, eval_result.json), the site map used (`config.json`, in the
reference's config format), the proxy's log and `demo_summary.json`.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import os
import signal
import sys
import tempfile
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from webarena_live.client import Client, ControlAPIError
from webarena_live.demo.stack import (
    CONFIG_FILE,
    DemoError,
    running_proxy,
    running_site,
    write_site_config,
)
from webarena_live.evaluator import (
    TaskSet,
    WebArenaLiveError,
    default_tasks_path,
    load_tasks,
    prepare_output_dir,
)
from webarena_live.launch import Ports, free_ports

SUMMARY_FILE = "demo_summary.json"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@dataclass(frozen=True)
class Verdict:
    """One row of the table: a task, how the agent went about it and what the proxy said."""

    task_id: int
    task_type: str
    intent: str
    approach: str
    expected_to_fail: bool
    status: str
    score: float
    reason: str

    @property
    def as_planned(self) -> bool:
        return (self.status != "success") == self.expected_to_fail


def _shown(value: Any) -> str:
    """A normalized value as people read it; URLs as one string with their query."""
    if isinstance(value, dict) and "base_url" in value:
        query = value.get("query_params") or {}
        pairs = [f"{key}={item}" for key, items in sorted(query.items()) for item in items]
        return str(value["base_url"]).rstrip("/") + ("?" + "&".join(pairs) if pairs else "")
    return json.dumps(value, ensure_ascii=False)


def event_differences(expected: Any, actual_events: Any) -> list[str]:
    """How the last candidate event differs from the expected one, field by field.

    The network evaluator's own message only says that no event matched; the
    result also carries the normalized expected event and the candidates, which
    say why.
    """
    if not isinstance(expected, dict) or not isinstance(actual_events, list):
        return []
    if not actual_events:
        return [f"expected an event for {_shown(expected.get('url'))}"]
    actual = actual_events[-1]
    if not isinstance(actual, dict):
        return []
    return [
        f"{field}: expected {_shown(want)}, got {_shown(actual.get(field))}"
        for field, want in expected.items()
        if want is not None and _shown(want) != _shown(actual.get(field))
    ]


def failure_reason(result: dict[str, Any]) -> str:
    """Why a verdict is not a success, from the failed assertions (or the error) of each evaluator."""
    reasons = []
    if result.get("error_msg"):
        reasons.append(str(result["error_msg"]))
    for evaluator in result.get("evaluators_results") or []:
        if evaluator.get("status") == "success":
            continue
        messages = [
            message
            for assertion in evaluator.get("assertions") or []
            for message in assertion.get("assertion_msgs")
            or [assertion.get("error_msg") or assertion["assertion_name"]]
        ]
        if evaluator.get("error_msg"):
            messages.append(str(evaluator["error_msg"]))
        name = evaluator.get("evaluator_name", "?")
        if name == "NetworkEventEvaluator":
            # The first message is the summary; the URL difference below reads better than the rest.
            messages = messages[:1]
            messages.extend(event_differences(evaluator.get("expected"), evaluator.get("actual_normalized")))
        text = "; ".join(str(message).rstrip(".") for message in messages)
        reasons.append(f"{name}: {text or evaluator.get('status')}")
    return "\n".join(reasons)


def drive_tasks(client: Client, ports: Ports, chromium: Path, tasks: TaskSet) -> list[Verdict]:
    """Every scripted attempt, each in its own session and browser context."""
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import sync_playwright

    from webarena_live.demo.agent import ATTEMPTS, TIMEOUT_MS

    proxy_server = f"http://127.0.0.1:{ports.session}"
    verdicts = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(chromium), headless=True, args=CHROMIUM_ARGS, proxy={"server": proxy_server}
        )
        try:
            for attempt in ATTEMPTS:
                name = f"demo-{attempt.task_id}"
                task_type = tasks[attempt.task_id].task_type.value.lower()
                started = client.start(attempt.task_id, session=name)
                context = browser.new_context(
                    proxy={"server": proxy_server, "username": name, "password": "demo"}, locale="en-US"
                )
                context.set_default_timeout(TIMEOUT_MS)
                try:
                    response = attempt.act(context.new_page(), started.start_urls[0])
                except PlaywrightError as error:
                    if _Interruption.requested:
                        raise KeyboardInterrupt from None
                    # A broken run is still judged: the agent reports it could not finish.
                    first_line = str(error).strip().splitlines()[0]
                    response = {"action": task_type, "status": "UNKNOWN_ERROR", "error_details": first_line}
                finally:
                    context.close()
                result = client.finish(name, response).to_dict()
                verdicts.append(
                    Verdict(
                        task_id=attempt.task_id,
                        task_type=task_type,
                        intent=started.intent,
                        approach=attempt.approach,
                        expected_to_fail=attempt.fails_on_purpose,
                        status=str(result.get("status")),
                        score=float(result.get("score", 0.0)),
                        reason=failure_reason(result),
                    )
                )
        finally:
            browser.close()
    return verdicts


def print_table(verdicts: list[Verdict]) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="webarena-live demo: the verdicts of the proxy", show_lines=True)
    table.add_column("task", justify="right")
    table.add_column("type")
    table.add_column("intent / scripted agent", ratio=3)
    table.add_column("status")
    table.add_column("score", justify="right")
    table.add_column("reason", ratio=4, overflow="fold")  # long URLs wrap instead of being cut
    for verdict in verdicts:
        color = "green" if verdict.status == "success" else "red"
        planned = "\n(planned)" if verdict.expected_to_fail and verdict.status != "success" else ""
        table.add_row(
            str(verdict.task_id),
            verdict.task_type,
            f"{escape(verdict.intent)}\n[dim italic]agent {escape(verdict.approach)}[/dim italic]",
            f"[{color}]{verdict.status}[/{color}]{planned}",
            f"{verdict.score:g}",
            escape(verdict.reason) or "-",
        )
    Console().print(table)


class _Interruption:
    """Ctrl-C (SIGINT) or SIGTERM arrived. The terminal's Ctrl-C also reaches Playwright's
    driver process, which may die first; its errors are then part of the same interruption."""

    requested = False

    @classmethod
    def handle(cls, signum: int, frame: FrameType | None) -> None:
        if cls.requested:
            return  # a second Ctrl-C must not cut the cleanup short (the proxy would be left running)
        cls.requested = True
        # The dead driver leaves futures whose errors asyncio would report at exit, and a subprocess
        # transport that may be collected after its loop closed (reported as "unraisable").
        logging.getLogger("asyncio").setLevel(logging.CRITICAL)
        sys.unraisablehook = _quiet_about_closed_loops
        raise KeyboardInterrupt


def _quiet_about_closed_loops(unraisable: sys.UnraisableHookArgs) -> None:
    """After an interruption: asyncio's "Event loop is closed" from a transport collected too late (there
    is nothing left for it to close) is not worth a traceback; anything else still gets one."""
    error = unraisable.exc_value
    if isinstance(error, RuntimeError) and str(error) == "Event loop is closed":
        return
    sys.__unraisablehook__(unraisable)


def run(args: argparse.Namespace) -> int:
    """Run the demo; 0 when every verdict came out as planned (the planned failure included)."""
    chromium = Path(args.chromium)
    if not (chromium.is_file() and os.access(chromium, os.X_OK)):
        print(
            f"webarena-live demo: Chromium not found at {chromium}; install it with "
            "`sudo apt-get install chromium` (Debian/Ubuntu) or pass --chromium PATH",
            file=sys.stderr,
        )
        return 1
    if importlib.util.find_spec("playwright") is None:
        print(
            "webarena-live demo: Playwright for Python is missing; run: pip install 'webarena-live[test]'",
            file=sys.stderr,
        )
        return 1
    try:
        output_dir = prepare_output_dir(args.output_dir or tempfile.mkdtemp(prefix="webarena-live-demo-"))
    except WebArenaLiveError as error:
        print(f"webarena-live demo: {error}", file=sys.stderr)
        return 2
    tasks_file = default_tasks_path()
    previous = {
        signum: signal.signal(signum, _Interruption.handle) for signum in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        verdicts = _run_stack(output_dir, tasks_file, chromium)
    except Exception as error:
        if not _Interruption.requested:
            if isinstance(error, DemoError | ControlAPIError):
                print(f"webarena-live demo: {error}", file=sys.stderr)
                return 1
            raise
        verdicts = None
    except KeyboardInterrupt:
        verdicts = None
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if verdicts is None:
        print("webarena-live demo: interrupted; site, proxy and browser are stopped.", file=sys.stderr)
        return 130
    print_table(verdicts)
    (output_dir / SUMMARY_FILE).write_text(
        json.dumps([verdict.__dict__ for verdict in verdicts], indent=2) + "\n", encoding="utf-8"
    )
    planned = all(verdict.as_planned for verdict in verdicts)
    passed = sum(verdict.status == "success" for verdict in verdicts)
    print(
        f"{passed} of {len(verdicts)} tasks passed; "
        + ("every verdict is as planned." if planned else "SOME VERDICTS ARE NOT AS PLANNED.")
    )
    print(f"Outputs (per task: agent_response.json, network.har, eval_result.json): {output_dir}")
    print(
        f"Evaluate them again offline: webarena-live evaluate --output-dir {output_dir} "
        f"--config {output_dir / CONFIG_FILE}"
    )
    print(f"The run in figures: webarena-live report {output_dir} --tasks demo")
    return 0 if planned else 1


def _run_stack(output_dir: Path, tasks_file: Path, chromium: Path) -> list[Verdict]:
    proxy_port, session_port, control_port = free_ports(3)
    ports = Ports(proxy=proxy_port, session=session_port, control=control_port)
    with ExitStack() as stack:
        site = stack.enter_context(running_site())
        config = write_site_config(output_dir, site.url, tasks_file)
        print(
            f"Demo Shop at {site.url}/ ; proxy on 127.0.0.1:{ports.proxy} (sessions: {ports.session}, "
            f"control API: {ports.control})",
            flush=True,
        )
        client = stack.enter_context(running_proxy(ports, output_dir, config, tasks_file))
        return drive_tasks(client, ports, chromium, load_tasks(tasks_file))
