"""Our NetworkEventEvaluator verdicts against the oracle's, on every official task that has one.

For each such task a golden trace (the expected events among static assets,
XHRs, earlier navigations and look-alike decoys of the expected event — other
parent path, escaped letter, dot segment) and three mutations of it (taken in turn from
`network_cases.MUTATIONS`: other status, other method, changed referer, extra
or ignored query parameters, changed post data, other path, upper-cased path,
missing event, JSON posted as text, query moved into a base64 path segment,
upper-cased post data, a later event shadowing the expected one...) are
written as HAR files. We judge the HAR as loaded by `load_trace`; the oracle
judges the HAR *we export* from that trace (`trace_to_har`), so a lossy
export shows up as a disagreement too. A quick run (tests/support/quick.py) judges `quick.sample`'s
share of each mutation's runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support import network_cases as cases
from tests.support import quick
from tests.support.network_own_tasks import HAND_WRITTEN
from tests.support.oracle_bridge import ask_oracle_network
from webarena_live.evaluator.har import load_trace, trace_to_har
from webarena_live.evaluator.network_evaluator import evaluate_network
from webarena_live.evaluator.tasks import load_tasks, parse_task

MUTATION_NAMES = [name for name in cases.MUTATIONS if name != "golden"]
PER_TASK = 3


def _build_runs(official_dataset: Path, tmp_path: Path) -> tuple[Any, list[dict[str, Any]]]:
    tasks = load_tasks(official_dataset)
    runs: list[dict[str, Any]] = []
    for position, (task_id, task) in enumerate(sorted(tasks.items())):
        if not task.network_configs:
            continue
        chosen = ["golden"] + [
            MUTATION_NAMES[(position * PER_TASK + k) % len(MUTATION_NAMES)] for k in range(PER_TASK)
        ]
        for name in chosen:
            entries = cases.MUTATIONS[name](task)
            if entries is None:
                continue
            original = tmp_path / f"{task_id}_{name}.har"
            original.write_text(json.dumps(cases.har(entries)))
            exported = tmp_path / f"{task_id}_{name}.exported.har"
            exported.write_text(json.dumps(trace_to_har(load_trace(original))))
            runs.append(
                {
                    "task_id": task_id,
                    "mutation": name,
                    "response": task.response_config.expected.model_dump(mode="json"),
                    "original": str(original),
                    "har": str(exported),
                }
            )
    return tasks, runs


def _ask_oracle(oracle_python: Path, runs: list[dict[str, Any]], tmp_path: Path) -> list[dict[str, Any]]:
    request = tmp_path / "request.json"
    request.write_text(json.dumps({"config": cases.CONFIG, "runs": runs}))
    verdicts: list[dict[str, Any]] = ask_oracle_network(oracle_python, "evaluate", request)
    assert len(verdicts) == len(runs)
    return verdicts


def test_network_verdicts_match_the_oracle(
    oracle_python: Path, official_dataset: Path, tmp_path: Path
) -> None:
    tasks, runs = _build_runs(official_dataset, tmp_path)
    assert len({run["task_id"] for run in runs}) > 400  # every official task with a network evaluator
    runs = quick.sample(runs, lambda run: run["mutation"])
    verdicts = _ask_oracle(oracle_python, runs, tmp_path)

    disagreements = []
    golden_passing = golden_total = 0
    statuses: dict[str, int] = {}
    for run, theirs_task in zip(runs, verdicts, strict=True):
        task = tasks[run["task_id"]]
        trace = load_trace(run["original"])
        ours = [
            evaluate_network(config, trace, task=task, site_map=cases.SITE_MAP).status.value
            for config in task.network_configs
        ]
        theirs = [e["status"] for e in theirs_task["evaluators"] if e["name"] == "NetworkEventEvaluator"]
        for status in ours:
            statuses[status] = statuses.get(status, 0) + 1
        if ours != theirs:
            disagreements.append(
                (run["task_id"], run["mutation"], ours, theirs, theirs_task.get("error_msg"))
            )
        if run["mutation"] == "golden":
            golden_total += 1
            golden_passing += all(status == "success" for status in theirs)
    agreed = len(runs) - len(disagreements)
    print(
        f"\nnetwork parity agreement: {agreed}/{len(runs)}; statuses: {statuses}; "
        f"golden traces passing under the oracle: {golden_passing}/{golden_total}"
    )
    assert not disagreements, disagreements[:10]
    # The cases must exercise both verdicts broadly, or agreement would mean little.
    assert statuses.get("success", 0) > quick.share(300) and statuses.get("failure", 0) > quick.share(300)
    assert golden_passing / golden_total > 0.8


def test_hand_written_network_cases_match_the_oracle(oracle_python: Path, tmp_path: Path) -> None:
    """Tasks of their own (`network_own_tasks.HAND_WRITTEN`), judged by both like the official ones."""
    runs: list[dict[str, Any]] = []
    for name, (document, entries) in HAND_WRITTEN.items():
        original = tmp_path / f"{name}.har"
        original.write_text(json.dumps(cases.har(entries)))
        exported = tmp_path / f"{name}.exported.har"
        exported.write_text(json.dumps(trace_to_har(load_trace(original))))
        response = {"task_type": "mutate", "status": "SUCCESS", "retrieved_data": None}
        runs.append(
            {
                "name": name,
                "task": document,
                "response": response,
                "har": str(exported),
                "original": str(original),
            }
        )
    verdicts = _ask_oracle(oracle_python, runs, tmp_path)
    judged = {}
    for run, theirs_run in zip(runs, verdicts, strict=True):
        task = parse_task(run["task"])
        trace = load_trace(run["original"])
        ours = [
            evaluate_network(config, trace, task=task, site_map=cases.SITE_MAP).status.value
            for config in task.network_configs
        ]
        theirs = [e["status"] for e in theirs_run["evaluators"] if e["name"] == "NetworkEventEvaluator"]
        judged[run["name"]] = (ours, theirs)
    print(f"\nhand-written network cases (ours, oracle's): {judged}")
    assert all(ours == theirs for ours, theirs in judged.values()), judged
    # The example: JSON text in a string field, indexed by JSONPath, fails under the reference.
    assert judged["json_text_index"] == (["failure"], ["failure"])
