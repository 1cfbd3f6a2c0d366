"""What the replica-pool benchmarks share (scripts/bench_pool.py and scripts/bench_pool_gitlab.py): their
command line, the reset endpoints that stand for a container restart, and one set-up run from the
sites' start to the last background reset.

Both scripts import this module and never each other (`bench_pool.py --site gitlab` hands over to
`bench_pool_gitlab.main`); the reset endpoint is the package's own (`webarena_live.demo.reset`, the
environment-control shape the demo shop serves), so no benchmark stands on the test suite's helpers.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import requests

from webarena_live.demo.reset import ResetServer
from webarena_live.launch import ServeProcess


def arguments(description: str, argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The pool benchmarks' command line (`--site` picks the site; each script reads the same flags)."""
    parser = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--agents", type=int, default=12)
    parser.add_argument("--tasks", type=int, default=48)
    parser.add_argument("--replicas", type=int, default=4)
    parser.add_argument("--reset-seconds", type=float, default=2.0, help="how long each reset takes")
    parser.add_argument("--think", type=float, default=0.5, help="an agent's own seconds per task")
    parser.add_argument(
        "--site", choices=("notes", "gitlab"), default="notes", help="the site the agents use"
    )
    return parser.parse_args(argv)


def slow_reset(restore: Callable[[], None], seconds: float) -> ResetServer:
    """A reset endpoint on a free port whose every reset takes `seconds` (a container restarting) and then
    restores the site; its `resets` counts the resets done."""

    def reset() -> None:
        time.sleep(seconds)
        restore()

    return ResetServer(("127.0.0.1", 0), reset)


@dataclass(frozen=True)
class SetupRun:
    """One set-up, run: its wall time (the last background reset included), each agent's result, the
    resets done and the pool's view of the site at the end (`GET /health`)."""

    seconds: float
    results: list[dict[str, Any]]
    resets: int
    site: dict[str, Any]


def run_agents(
    folder: Path,
    site: str,
    replicas: Sequence[tuple[ThreadingHTTPServer, ResetServer]],
    entry: dict[str, Any],
    tasks: list[dict[str, Any]],
    agent: Callable[[str, dict[str, Any]], dict[str, Any]],
    *,
    isolation: str,
    agents: int,
) -> SetupRun:
    """Serve `replicas` (each a site and its reset endpoint) as `site` of a site map (`entry`'s other
    keys beside them), start `webarena-live serve` on `tasks`, run `agent(control_url, task)` for every
    task, `agents` at a time, and wait for the pool's last reset."""
    servers = [server for pair in replicas for server in pair]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    urls = [{"urls": [_url(site_server)], "reset_url": reset.url} for site_server, reset in replicas]
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"environments": {site: {**entry, "replicas": urls}}}))
    # the tasks as the dataset file holds them: an agent's own keys (`_key`) left out
    (folder / "tasks.json").write_text(
        json.dumps([{k: v for k, v in t.items() if k[0] != "_"} for t in tasks])
    )
    serve = ServeProcess(
        "--tasks", str(folder / "tasks.json"), "--config", str(folder / "config.json"),
        "--output-dir", str(folder / "out"), "--isolation", isolation, "--quiet", log=folder / "serve.log",
    )  # fmt: skip
    serve.start(timeout=60)
    try:
        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=agents) as pool:
            results = list(pool.map(lambda task: agent(serve.control_url, task), tasks))
        while (view := _pool_site(serve.control_url, site))["resetting"]:
            time.sleep(0.1)  # the last background resets belong to the run
        seconds = time.perf_counter() - started
    finally:
        serve.stop()
        for server in servers:
            server.shutdown()
            server.server_close()
    return SetupRun(seconds, results, sum(reset.resets for _, reset in replicas), view)


def _pool_site(control: str, site: str) -> dict[str, Any]:
    view: dict[str, Any] = requests.get(f"{control}/health", timeout=30).json()["pool"]["sites"][site]
    return view


def _url(server: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"
