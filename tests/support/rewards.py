"""What the reward tests share, in every framework's venv: a real `serve` in front of the demo shop with an
output directory, HTTP agents that browse a planned path through a session's own proxy address, and
the reference's verdicts on the runs the finishes wrote."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.site.harness import oracle_dataset
from tests.support.serve_process import NAVIGATED, Served, browse, start_serve, start_session

DEMO_TASKS = Path(__file__).resolve().parents[2] / "tasks" / "demo.json"
LAMP_PRICE = {"task_type": "RETRIEVE", "status": "SUCCESS", "retrieved_data": [34.99]}
WRONG_PRICE = {"task_type": "RETRIEVE", "status": "SUCCESS", "retrieved_data": [35.99]}


@dataclass(frozen=True)
class Plan:
    """An HTTP agent's episode: the task, the pages it navigates, its final response and the verdict."""

    task_id: int
    paths: tuple[str, ...]
    answer: Any
    score: float


PLANS = {
    "navigate-right": Plan(1003, ("/", "/enamel-camp-mug.html"), NAVIGATED, 1.0),
    "navigate-short": Plan(1003, ("/enamel-camp-mug.html", "/"), NAVIGATED, 0.0),
    "retrieve-right": Plan(1001, ("/",), LAMP_PRICE, 1.0),
    "retrieve-wrong": Plan(1001, ("/",), WRONG_PRICE, 0.0),
    "not-json": Plan(1001, ("/",), "I think the lamp costs about thirty-five dollars", 0.0),
}
"""Each right or wrong on purpose; `not-json` is an answer the agent gave as prose (a failure, not an
environment problem)."""


def serve_shop(tmp: Path, shop: str, *extra: str) -> tuple[Served, Path]:
    """`webarena-live serve` with the demo shop mapped and outputs in `tmp/out`: (served, out)."""
    served, _, _ = start_serve(tmp, shop, tmp / "state", "--output-dir", str(tmp / "out"), *extra)
    return served, tmp / "out"


def run_http_agent(
    control: str, shop: str, session: str, plan: Plan, *, run: str | None = None
) -> dict[str, Any]:
    """Start `session` on the plan's task (outputs in run `run`, default the session's name) and browse
    its pages through the session's own address: `POST /sessions`' answer."""
    started = start_session(control, session, plan.task_id, run=run or session)
    for path in plan.paths:
        browse(started["proxy"], shop, path)
    return started


def reference_verdicts(
    oracle_python: Path, official_dataset: Path, shop: str, run_dir: Path, work: Path
) -> dict[int, tuple[str, float]]:
    """The reference's `eval-tasks` on a copy of a run directory: (status, score) by task id."""
    judged = work / f"judged-{run_dir.name}"
    subprocess.run(["cp", "-r", str(run_dir), str(judged)], check=True)
    for stale in judged.glob("*/eval_result.json"):
        stale.unlink()
    dataset = oracle_dataset(official_dataset, DEMO_TASKS, work / "oracle-dataset.json")
    config = work / "oracle-config.json"
    config.write_text(
        json.dumps({"environments": {"__SHOPPING__": {"urls": [shop]}}, "test_data_file": str(dataset)})
    )
    task_ids = sorted(int(p.name) for p in judged.iterdir() if p.is_dir() and p.name.isdigit())
    done = subprocess.run(
        [
            str(oracle_python),
            "-m",
            "webarena_verified",
            "eval-tasks",
            "--output-dir",
            str(judged),
            "--config",
            str(config),
            "--task-ids",
            ",".join(map(str, task_ids)),
        ],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    verdicts = {}
    for task_id in task_ids:
        result = json.loads((judged / str(task_id) / "eval_result.json").read_text())
        verdicts[task_id] = (result["status"], float(result["score"]))
    return verdicts
