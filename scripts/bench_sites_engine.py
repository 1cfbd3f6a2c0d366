"""The container engine and the task of `bench_sites.py`: Podman's Docker-compatible service on a socket
and a storage of the benchmark's own, with the site images in it, and the mutating task its sessions run.

The storage (`--root`/`--runroot`) is the benchmark's alone, so every container and volume in it is the
benchmark's: all of them are removed before the run (what a killed run left) and after it, and nothing of
anyone else's is touched. It is kept under /var/tmp between runs with its images (scripts/
build_site_images.sh copies them in when missing or out of date), and held by one run at a time (a lock).

Podman asks runc for a container's limits, which runc may not raise past the service's own hard limits
here (the sandboxes drop CAP_SYS_RESOURCE), so the site map's entries keep the product's default
`ulimits`, which stay within them.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # scripts.support.engines

from scripts.support.engines import SHOPPING, Engine, ensure_images, start_engine, stop_engine  # noqa: E402

__all__ = ["SHOPPING", "WRITE", "Engine", "podman_service", "write_tasks"]

HOME = Path(os.environ.get("WEBARENA_LIVE_BENCH_ENGINE") or "/var/tmp/webarena-live-bench-sites")

WRITE = 5002
WRITE_TASK = {
    "sites": ["shopping"], "task_id": WRITE, "intent_template_id": 9502, "start_urls": ["__SHOPPING__"],
    "intent": "Place an order named container-order.", "intent_template": "Place an order named {{name}}.",
    "instantiation_dict": {"name": "container-order"},
    "eval": [
        {"evaluator": "AgentResponseEvaluator", "results_schema": {"type": "null"},
         "expected": {"task_type": "mutate", "status": "SUCCESS", "retrieved_data": None}},
        {"evaluator": "NetworkEventEvaluator",
         "expected": {"url": "__SHOPPING__/order", "http_method": "POST", "response_status": 200,
                      "post_data": {"name": "container-order"}}},
    ],
    "revision": 1,
}  # fmt: skip
"""A mutating task on the shop: place an order (`POST /order`), judged by that request and the answer."""


def write_tasks(path: Path) -> Path:
    path.write_text(json.dumps([WRITE_TASK]))
    return path


@contextlib.contextmanager
def podman_service() -> Iterator[Engine]:
    """The benchmark's podman service (scripts/support/engines.py starts it, as the tests' are), its
    storage with the site images, held (a lock) until the block ends, emptied before and after."""
    HOME.mkdir(parents=True, exist_ok=True)
    with (HOME / "lock").open("w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SystemExit(f"another bench_sites.py run holds {HOME} (its lock file)") from None
        run = Path("/run")
        root = HOME / "engine"
        runroot = (run if os.access(run, os.W_OK) else HOME) / "webarena-live-bench-sites" / "engine"
        sockets = Path(tempfile.mkdtemp(prefix="wl-bench-"))  # short: a socket's path has 108 bytes
        try:
            try:
                ensure_images(root, runroot)
                engine = start_engine(root, runroot, sockets)
            except RuntimeError as error:
                raise SystemExit(str(error)) from None
            try:
                engine.remove_everything()  # what a killed run left
                yield engine
            finally:
                stop_engine(engine)
        finally:
            shutil.rmtree(sockets, ignore_errors=True)
