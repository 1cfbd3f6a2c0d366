"""Writing case groups as run directories, and running the oracle and us on them.

A group is one run directory in the reference's layout,
`<group>/<task_id>/{agent_response.json,network.har}`, so the oracle's own
batch command judges it in one process (its per-run overhead dominates).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from scripts.support.conformance.har_entries import har_document


@dataclasses.dataclass(frozen=True)
class RunCase:
    """One generated run: what the agent answered and what the browser did."""

    task_id: int
    case: str
    response: Any
    """A JSON value (written as JSON) or `RawText` (written verbatim)."""
    entries: list[dict[str, Any]] | None
    """HAR entries; None writes `raw_har` verbatim instead."""
    raw_har: str | None = None


@dataclasses.dataclass(frozen=True)
class RawText:
    text: str


@dataclasses.dataclass(frozen=True)
class Verdict:
    status: str
    score: float


def write_group(directory: Path, cases: list[RunCase]) -> None:
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    index = {}
    for case in cases:
        run = directory / str(case.task_id)
        run.mkdir()
        response = (
            case.response.text if isinstance(case.response, RawText) else json.dumps(case.response, indent=2)
        )
        (run / "agent_response.json").write_text(response, encoding="utf-8")
        har_text = case.raw_har if case.entries is None else json.dumps(har_document(case.entries))
        (run / "network.har").write_text(har_text or "", encoding="utf-8")
        index[str(case.task_id)] = case.case
    (directory / "cases.json").write_text(json.dumps(index, indent=1), encoding="utf-8")


def read_cases(directory: Path) -> dict[int, str]:
    return {int(k): v for k, v in json.loads((directory / "cases.json").read_text()).items()}


def read_verdicts(directory: Path) -> dict[int, Verdict]:
    """The `eval_result.json` verdicts found under a run directory (missing ones are left out)."""
    verdicts = {}
    for result in directory.glob("*/eval_result.json"):
        data = json.loads(result.read_text(encoding="utf-8"))
        verdicts[int(result.parent.name)] = Verdict(status=data["status"], score=float(data["score"]))
    return verdicts


def run_oracle(
    oracle_python: Path, directory: Path, config: Path, dataset: Path | None = None
) -> subprocess.Popen:
    """Start the oracle's `eval-tasks` on a run directory; the caller waits."""
    command = [str(oracle_python.parent / "webarena-verified"), "eval-tasks", "--output-dir", str(directory)]
    command += ["--config", str(config)]
    # The child keeps its own copy of the log's descriptor; ours is closed at once.
    with (directory / "oracle.log").open("w") as log:
        return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)


def copy_runs(source: Path, destination: Path) -> None:
    """A copy of a group without any verdicts, for the other evaluator to judge."""
    if destination.exists():
        shutil.rmtree(destination)
    shutil.copytree(
        source,
        destination,
        ignore=shutil.ignore_patterns("eval_result.json", "eval_results.json", "*.log", "*.txt"),
    )
