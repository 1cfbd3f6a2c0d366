"""A refused start writes nothing: real `webarena-live serve` processes (one, and a fleet of two workers)
over two real copies of a site under `--isolation readers`, each refusal of `POST /sessions` (4xx, 503)
leaving the output directory byte for byte as it was (no folder made, `OUT/.pool.json` not rewritten,
no copy marked `resetting`)."""

from __future__ import annotations

import hashlib
import socket
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.support.counter_replicas import DEMO_TASKS, MUTATE, READ, counter_config, counters
from tests.support.serve_process import launch_serve

WRONG_FAULTS = {"rules": [{"probability": 1.5, "fault": "drop"}]}


def files(root: Path) -> dict[str, str]:
    """Every file and folder under `root`, a file by its content's hash."""
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "/"
        for path in sorted(root.rglob("*"))
    }


def refused(control: str, body: dict[str, Any], status: int, error: str) -> None:
    reply = requests.post(f"{control}/sessions", json=body, timeout=60)
    assert (reply.status_code, reply.json()["error"]) == (status, error), reply.text


@pytest.mark.parametrize("fleet", [(), ("--workers", "2")], ids=["one process", "a fleet"])
def test_a_refused_start_leaves_the_output_directory_as_it_was(
    tmp_path: Path, fleet: tuple[str, ...]
) -> None:
    taken = socket.create_server(("127.0.0.1", 0))  # another program holds every session port
    port = taken.getsockname()[1]
    out = tmp_path / "out"
    try:
        with counters(2) as copies:
            config = counter_config(tmp_path / "config.json", copies)
            served = launch_serve(
                tmp_path, "--tasks", str(DEMO_TASKS), "--config", str(config), "--output-dir", str(out),
                "--isolation", "readers", "--session-ports", f"{port}-{port}",
                "--set", f"confdir={tmp_path / 'conf'}", "--quiet", *fleet,
            )  # fmt: skip
            try:
                before = files(out)
                pool = requests.get(f"{served.control}/health", timeout=30).json()["pool"]
                # refused before the lease: a mistaken plan, an unknown task, a bad session name
                refused(served.control, {"task_id": READ, "faults": WRONG_FAULTS}, 400, "bad_faults")
                refused(served.control, {"task_id": 999_999, "session": "x"}, 404, "unknown_task")
                refused(served.control, {"task_id": READ, "session": ""}, 400, "bad_session_name")
                # refused after the lease: no address for the session (a copy leased, then given back)
                for task in (MUTATE, READ):
                    refused(served.control, {"task_id": task, "session": f"t{task}"}, 503, "no_address")
                assert files(out) == before
                after = requests.get(f"{served.control}/health", timeout=30).json()["pool"]
                assert after["sites"] == pool["sites"], after  # no reset skipped, none under way
                assert [site["resetting"] for site in after["sites"].values()] == [0], after
            finally:
                served.stop()
    finally:
        taken.close()
