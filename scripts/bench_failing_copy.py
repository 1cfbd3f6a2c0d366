#!/usr/bin/env python
"""A copy that fails part-way through a run, measured: how many sessions land on it before the pool takes
it out, how long until it is back, and which verdicts differ from the same run without the failure.

Two copies of a small shop page (`GET /enamel-camp-mug.html`), `serve --isolation readers`, the demo's
navigate task 1003 (the reference wants that page answered 200) run by `--sessions` agents one after the
other, each a browser-like navigation through its session's own address, then its finish. Readers take
the first free copy, so every session lands on copy 0 until something keeps them off it. After
`--fail-after` sessions copy 0 starts answering 500 to everything (a broken application); its reset
endpoint repairs it after `--reset-seconds` (a container restart). The same run without the failure is
the baseline.

    .venv/bin/python scripts/bench_failing_copy.py [--sessions 16] [--fail-after 4] [--reset-seconds 1]

Targets: at most 2 sessions land on the failing copy; it is back (leased again) once its reset repairs
it; the only verdicts that differ from the baseline are sessions that ran on it, and each says so
(`site_errors`).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import requests

from webarena_live.demo.reset import ResetServer
from webarena_live.launch import ServeProcess

TASK = 1003
PAGE = "/enamel-camp-mug.html"
NAVIGATION = {
    "Accept": "text/html,application/xhtml+xml",
    "Sec-Fetch-Dest": "document",
    "Sec-Fetch-Mode": "navigate",
    "Sec-Fetch-User": "?1",
}
ANSWER = {"task_type": "navigate", "status": "success", "retrieved_data": None}


class Shop(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Page)
        self.broken = False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Page(BaseHTTPRequestHandler):
    server: Shop

    def do_GET(self) -> None:
        broken = self.server.broken
        body = (
            b"<!doctype html><title>error</title>"
            if broken
            else b"<!doctype html><title>Enamel Camp Mug</title>"
        )
        self.send_response(500 if broken else 200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def run(folder: Path, sessions: int, fail_after: int | None, reset_seconds: float) -> dict[str, Any]:
    shops = [Shop(), Shop()]

    def repair(shop: Shop) -> None:
        time.sleep(reset_seconds)
        shop.broken = False

    resets = [ResetServer(("127.0.0.1", 0), lambda shop=shop: repair(shop)) for shop in shops]
    for server in [*shops, *resets]:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    folder.mkdir()
    replicas = [
        {"urls": [shop.url], "reset_url": reset.url} for shop, reset in zip(shops, resets, strict=True)
    ]
    (folder / "sites.json").write_text(json.dumps({"environments": {"__SHOPPING__": {"replicas": replicas}}}))
    serve = ServeProcess(
        "--config", str(folder / "sites.json"), "--output-dir", str(folder / "out"),
        "--isolation", "readers", "--quiet", log=folder / "serve.log",
    )  # fmt: skip
    serve.start(timeout=60)
    control = serve.control_url
    verdicts: list[dict[str, Any]] = []
    broke_at = back_at = None
    taken_out = False
    try:
        for n in range(sessions):
            if fail_after is not None and n == fail_after:
                shops[0].broken, broke_at = True, time.perf_counter()
            start = {"task_id": TASK, "session": f"s{n}", "wait": 60}
            started = requests.post(f"{control}/sessions", json=start, timeout=90).json()
            copy = [shop.url for shop in shops].index(started["replicas"]["__SHOPPING__"])
            requests.get(f"{started['replicas']['__SHOPPING__']}{PAGE}", headers=NAVIGATION,
                         proxies={"http": started["proxy"]}, timeout=30)  # fmt: skip
            result = requests.post(f"{control}/sessions/s{n}/finish", json=ANSWER, timeout=60).json()
            errors = (result.get("site_errors") or {}).get("count", 0)
            verdicts.append({"session": n, "copy": copy, "status": result["status"], "site_errors": errors})
            if broke_at is not None and copy == 1:
                taken_out = True
            if taken_out and back_at is None and copy == 0:  # leased again: repaired and probed
                back_at = time.perf_counter()
            if broke_at is not None and back_at is None:
                time.sleep(0.2)  # the agents keep coming while the copy is being repaired
    finally:
        serve.stop()
        for server in [*shops, *resets]:
            server.shutdown()
            server.server_close()
    return {"verdicts": verdicts, "resets": [reset.resets for reset in resets],
            "back_seconds": None if broke_at is None or back_at is None else back_at - broke_at}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=16)
    parser.add_argument("--fail-after", type=int, default=4)
    parser.add_argument("--reset-seconds", type=float, default=1.0)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-failing-copy-") as work:
        baseline = run(Path(work) / "baseline", options.sessions, None, options.reset_seconds)
        failing = run(Path(work) / "failing", options.sessions, options.fail_after, options.reset_seconds)
    broken = [v for v in failing["verdicts"] if v["copy"] == 0 and v["site_errors"]]  # landed while broken
    differ = [
        (mine, theirs) for mine, theirs in zip(failing["verdicts"], baseline["verdicts"], strict=True)
        if mine["status"] != theirs["status"]
    ]  # fmt: skip
    unmarked = [mine for mine, _ in differ if not mine["site_errors"]]
    print(
        f"{options.sessions} sessions of task {TASK}, 2 copies, --isolation readers; copy 0 answers "
        f"500 from session {options.fail_after} on, repaired by its reset ({options.reset_seconds:g} s)"
    )
    print(f"  sessions that landed on the failing copy before it was taken out: {len(broken)} (target <= 2)")
    back = failing["back_seconds"]
    print(
        f"  back in service (leased again) after: {'never' if back is None else f'{back:.1f} s'}; "
        f"resets called: copy 0 {failing['resets'][0]}, copy 1 {failing['resets'][1]}"
    )
    print(
        f"  verdicts that differ from the run without the failure: {len(differ)}, "
        f"each marked with site_errors: {'yes' if not unmarked else f'no ({len(unmarked)} unmarked)'}"
    )
    for mine, theirs in differ:
        print(
            f"    session {mine['session']}: copy {mine['copy']}, {mine['status']} "
            f"(baseline {theirs['status']}), site_errors {mine['site_errors']}"
        )


if __name__ == "__main__":
    main()
