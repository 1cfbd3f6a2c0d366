#!/usr/bin/env python
"""CPU per flow of the addon's per-flow hooks, in process: this tree beside another, side by side.

`bench_proxy.py` measures what users run, but its rounds spread over several points while the
addon's own work is a few points of the proxy's; this script isolates that work. It configures the
addon as `bench_proxy.py`'s harness deploys it (a site map naming one origin, an output directory,
demo task 1005 started in a session through the reserved host: `bench_common.harness_options`),
then drives real mitmproxy flows with the load's headers (`bench_traffic.build_request`) through
`requestheaders`, `request` and `response` on a running event loop, eight flows a loop turn, as
mitmproxy would: every flow captured, journaled, spooled and kept. The flows are made
before each batch and only the hooks are timed (`time.process_time`).

Each tree runs in its own process, in turn, `--runs` times. A process's figure is its fastest batch,
in CPU microseconds per flow (as `timeit` takes the fastest: on a shared machine a slower batch only
measures the neighbours); a tree's is the median of its processes', and the ratio is this tree's
against the other's (below 1: cheaper).

    .venv/bin/python scripts/bench_hooks.py [--other COMMIT|DIR] [--runs N] [--batches N] [--flows N]

`--other` is a commit of this repository (exported) or a directory that holds another tree's package
as `webarena_live/` (`bench_common.other_tree`): it is put first on `PYTHONPATH` for that tree's runs.
Without it, only this tree is measured.

What it leaves out: mitmproxy's own dispatch of the hooks and what a busy proxy's memory does to
them (`bench_proxy.py` measures those, with everything else).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_common import harness_options, other_tree
from bench_traffic import build_request, proxy_authorization

ORIGIN = "http://127.0.0.1:9"
SESSION = "bench"
TASK_ID = 1005
TURN = 8
"""Flows whose `response` hooks run in one loop turn (their journal lines go down together)."""


def sent_headers(url: str) -> list[tuple[bytes, bytes]]:
    """The header fields `bench_proxy.py`'s load sends (`bench_traffic.build_request`)."""
    head = build_request(url, SESSION).decode("latin-1").split("\r\n")[1:]
    fields = (line.partition(": ") for line in head if line)
    return [(name.encode("latin-1"), value.encode("latin-1")) for name, _, value in fields]


RESPONSE_HEADERS = {"Content-Type": "text/html; charset=utf-8", "Server": "bench",
                    "Date": "Fri, 27 Nov 2026 23:00:00 GMT"}  # fmt: skip


def make_flow(
    method: str, url: str, headers: list[tuple[bytes, bytes]], body: bytes = b"", answer: bool = True
) -> Any:
    from mitmproxy import http
    from mitmproxy.test import tflow

    request = http.Request.make(method, url, body, headers)
    request.timestamp_start = time.time()
    request.timestamp_end = request.timestamp_start + 0.001
    response: Any = False
    if answer:
        response = http.Response.make(200, b"x" * 256, RESPONSE_HEADERS)
        response.timestamp_start = request.timestamp_end
        response.timestamp_end = response.timestamp_start + 0.001
    return tflow.tflow(req=request, resp=response)


async def drive(addon: Any, flows: list[Any]) -> None:
    """The hooks in mitmproxy's order; the `response` hooks of `TURN` flows awaited together."""
    turn: list[Any] = []
    for flow in flows:
        upstream, flow.response = flow.response, None  # the site answers after the request hooks
        addon.requestheaders(flow)
        if (pending := addon.request(flow)) is not None:
            await pending
        if flow.response is None:
            flow.response = upstream
        turn.append(flow)
        if len(turn) == TURN:
            await asyncio.gather(*[w for w in map(addon.response, turn) if w is not None])
            turn = []
    await asyncio.gather(*[w for w in map(addon.response, turn) if w is not None])


async def measure(batches: int, flows: int) -> list[float]:
    """CPU microseconds per flow, one figure per batch."""
    from mitmproxy.test import taddons

    from webarena_live.proxy.addon import WebArenaLive

    work = Path(tempfile.mkdtemp(prefix="bench-hooks-"))
    options = dict(option.split("=", 1) for option in harness_options(ORIGIN, work))
    addon = WebArenaLive()
    with taddons.context(addon) as tctx:
        tctx.configure(addon, **options, webarena_journal_dir=str(work / "journal"))
        credentials = proxy_authorization(SESSION).encode()
        start = make_flow(
            "POST", "http://webarena-live.invalid/sessions",
            [(b"Content-Type", b"application/json"), (b"Proxy-Authorization", credentials)],
            json.dumps({"task_id": TASK_ID, "session": SESSION}).encode(), answer=False,
        )  # fmt: skip
        addon.requestheaders(start)
        if (served := addon.request(start)) is not None:  # the reserved host's app
            await served
        if start.response is None or start.response.status_code != 200:
            raise SystemExit(f"the session did not start: {start.response and start.response.content!r}")
        figures = []
        for _ in range(batches):
            urls = [f"{ORIGIN}/page/{index % 50}" for index in range(flows)]
            batch = [make_flow("GET", url, sent_headers(url)) for url in urls]
            gc.collect()
            started = time.process_time()
            await drive(addon, batch)
            figures.append((time.process_time() - started) / flows * 1e6)
        assert addon.context is not None
        session = addon.context.sessions.get(SESSION)
        if session is None or len(session.trace) != batches * flows:
            raise SystemExit("not every flow was captured")
    return figures


def run_tree(tree: dict[str, str], batches: int, flows: int) -> tuple[str, float]:
    """One process of one tree (`tree`: its environment): where its package is, and its fastest batch."""
    env = {**os.environ, **tree}
    command = [sys.executable, __file__, "--child", "--batches", str(batches), "--flows", str(flows)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"a run failed:\n{done.stderr.strip()}")
    package, figure = done.stdout.strip().splitlines()[-2:]
    return package, float(figure)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--other", help="another tree: a commit, or a directory holding its webarena_live/")
    parser.add_argument("--runs", type=int, default=5, help="processes per tree, in turn (default 5)")
    parser.add_argument("--batches", type=int, default=10, help="batches per process (default 10)")
    parser.add_argument("--flows", type=int, default=2000, help="flows per batch (default 2000)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        import webarena_live

        print(Path(webarena_live.__file__).parent)
        print(min(asyncio.run(measure(args.batches, args.flows))))
        return 0
    trees: dict[str, dict[str, str]] = {"this tree": {}}
    packages: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="bench-hooks-tree-") as work:  # an exported commit's
        if args.other:
            trees["other tree"] = other_tree(args.other, Path(work))[0]
        figures: dict[str, list[float]] = {name: [] for name in trees}
        for _ in range(args.runs):
            for name, tree in trees.items():
                packages[name], figure = run_tree(tree, args.batches, args.flows)
                figures[name].append(figure)
    print(f"CPU per flow of the addon's hooks ({args.runs} runs of {args.batches} x {args.flows} flows)")
    for name, values in figures.items():
        shown = ", ".join(f"{value:.1f}" for value in values)
        print(f"  {name:10}: median {statistics.median(values):.1f} us  [{shown}]  ({packages[name]})")
    if args.other:
        ratio = statistics.median(figures["this tree"]) / statistics.median(figures["other tree"])
        print(f"  this tree / other tree: {ratio:.3f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
