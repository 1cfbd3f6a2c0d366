"""Shared pieces of the addon's tests: real mitmproxy flows, a small task file, the oracle as a judge.

Flows are real `mitmproxy.http.HTTPFlow` objects (built with mitmproxy's own
test helpers); the task file is a real dataset file in the official format for
the `shopping` site; the oracle is the reference evaluator run in its own
virtual environment on the files our outputs wrote.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mitmproxy import http
from mitmproxy.test import tflow

from tests.support.oracle_bridge import run_in_oracle

SHOP = "http://shop.test"

NAVIGATE_TASK = 9001
MUTATE_TASK = 9002
RETRIEVE_TASK = 9003


def _task(task_id: int, intent: str, evaluators: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "sites": ["shopping"],
        "task_id": task_id,
        "intent_template_id": 900,
        "start_urls": ["__SHOPPING__/"],
        "intent": intent,
        "intent_template": intent,
        "instantiation_dict": {},
        "eval": evaluators,
        "revision": 1,
    }


def _response_evaluator(task_type: str, data: Any, schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "evaluator": "AgentResponseEvaluator",
        "results_schema": schema,
        "expected": {"task_type": task_type, "status": "SUCCESS", "retrieved_data": data},
    }


TASKS: list[dict[str, Any]] = [
    _task(
        NAVIGATE_TASK,
        "Open the page of product 7",
        [
            _response_evaluator("navigate", None, {"type": "null"}),
            {"evaluator": "NetworkEventEvaluator", "expected": {"url": "__SHOPPING__/products/7"}},
        ],
    ),
    _task(
        MUTATE_TASK,
        "Add two of A7 to the cart",
        [
            _response_evaluator("mutate", None, {"type": "null"}),
            {
                "evaluator": "NetworkEventEvaluator",
                "expected": {
                    "url": "__SHOPPING__/cart/add",
                    "http_method": "POST",
                    "response_status": 302,
                    "post_data": {"sku": "A7", "qty": "2"},
                },
            },
        ],
    ),
    _task(
        RETRIEVE_TASK,
        "What is the name of product 7?",
        [_response_evaluator("retrieve", ["Blue Mug"], {"type": "array", "items": {"type": "string"}})],
    ),
]


def write_tasks(directory: Path) -> Path:
    path = directory / "tasks.json"
    path.write_text(json.dumps(TASKS, indent=1))
    return path


def environments(base_url: str = SHOP) -> dict[str, Any]:
    """The reference config's `environments` for our one site."""
    return {"__SHOPPING__": {"urls": [base_url]}}


def write_config(directory: Path, base_url: str = SHOP) -> Path:
    path = directory / "config.json"
    path.write_text(json.dumps({"environments": environments(base_url)}))
    return path


def browser_headers(*, navigate: bool) -> dict[str, str]:
    """Request headers Chromium sends for a link click (navigate) or a fetch()."""
    if navigate:
        return {
            "Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
            "Sec-Fetch-Dest": "document",
            "Sec-Fetch-Mode": "navigate",
            "Sec-Fetch-Site": "same-origin",
            "Sec-Fetch-User": "?1",
        }
    return {"Accept": "*/*", "Sec-Fetch-Dest": "empty", "Sec-Fetch-Mode": "cors",
            "Sec-Fetch-Site": "same-origin"}  # fmt: skip


def make_flow(
    method: str = "GET",
    url: str = f"{SHOP}/",
    *,
    headers: dict[str, str] | list[tuple[bytes, bytes]] | None = None,
    body: bytes = b"",
    status: int | None = 200,
    response_headers: dict[str, str] | list[tuple[bytes, bytes]] | None = None,
    response_body: bytes = b"",
    error: str | None = None,
) -> http.HTTPFlow:
    """A finished flow as mitmproxy hands it to the `response` (or, with `error`, the `error`) hook."""
    request = http.Request.make(method, url, body, headers if headers is not None else {})
    request.timestamp_start = 1_700_000_000.0
    request.timestamp_end = 1_700_000_000.01
    response: http.Response | bool = False
    if status is not None:
        fields = response_headers if response_headers is not None else {}
        response = http.Response.make(status, response_body, fields)
        response.timestamp_start = 1_700_000_000.02
        response.timestamp_end = 1_700_000_000.05
    flow = tflow.tflow(req=request, resp=response)
    if error is not None:
        from mitmproxy import flow as mflow

        flow.error = mflow.Error(error, timestamp=1_700_000_000.5)
    return flow


ORACLE_JUDGE = r"""
import json, os, sys, tempfile
from pathlib import Path
import webarena_verified
from webarena_verified.api import WebArenaVerified
from webarena_verified.types.config import WebArenaVerifiedConfig

ours = json.loads(Path(sys.argv[1]).read_text())
environments = json.loads(sys.argv[2])
task_id, task_dir = int(sys.argv[3]), Path(sys.argv[4])
# The reference loads only complete 812-task datasets: swap our tasks in for as many official ones.
official = Path(os.path.dirname(webarena_verified.__file__)) / "assets" / "dataset" / "webarena-verified.json"
dataset = json.loads(official.read_text())[len(ours):] + ours
merged = Path(tempfile.mkdtemp()) / "dataset.json"
merged.write_text(json.dumps(dataset))
config = WebArenaVerifiedConfig(test_data_file=merged, environments=environments)
result = WebArenaVerified(config=config).evaluate_task(
    task_id=task_id,
    agent_response=task_dir / "agent_response.json",
    network_trace=task_dir / "network.har",
)
print(json.dumps({"status": str(result.status.value), "score": result.score}))
"""


def oracle_verdict(
    oracle_python: Path, tasks_file: Path, task_id: int, task_dir: Path, base_url: str = SHOP
) -> dict[str, Any]:
    """The reference evaluator's status and score for the files in `task_dir`."""
    args = [
        "-c",
        ORACLE_JUDGE,
        str(tasks_file),
        json.dumps(environments(base_url)),
        str(task_id),
        str(task_dir),
    ]
    done = run_in_oracle(oracle_python, args)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])
