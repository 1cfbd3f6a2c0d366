"""Bridge to the reference evaluator, run with the ORACLE's interpreter (never imported by pytest).

Reads one JSON document on stdin and prints one JSON list of verdicts:

    {"mode": "values",
     "cases": [{"op": "list"|"value", "schema": .., "actual": .., "expected": .., "ordered": ..}]}
        op "list":  the retrieved_data path (expected strict, actual lenient, compared as lists)
        op "value": the general schema walk used for request bodies (post data, query strings)
        -> [{"verdict": "match"|"mismatch"|"error", "detail": str}]

    {"mode": "responses", "tasks": [task, ...], "cases": [{"task_id": .., "response": ..}], "config": {..}?}
        each response judged by the reference's public API against a small dataset of `tasks`
        -> [{"status": .., "score": .., "detail": str}]  (the AgentResponseEvaluator's result)
        `config` is an optional site map in the reference's format ({"environments": {...}}).

    {"mode": "files", "config": PATH, "cases": [{"task_id": .., "response": PATH, "har": PATH}]}
        each run's files (agent_response.json, network.har) judged by the reference's public
        `evaluate_task` in one process (`config` names a config file with its `test_data_file`)
        -> [{"status": .., "score": .., "detail": str}]
"""

from __future__ import annotations

import json
import logging
import sys
import tempfile
from pathlib import Path
from typing import Any

# Response-only tasks never look at the trace, but the reference wants a non-empty one.
_PLACEHOLDER_ENTRY = {
    "startedDateTime": "2025-01-01T00:00:00.000Z",
    "time": 1,
    "request": {
        "method": "GET",
        "url": "http://127.0.0.1/",
        "httpVersion": "HTTP/1.1",
        "headers": [],
        "queryString": [],
        "cookies": [],
        "headersSize": -1,
        "bodySize": 0,
    },
    "response": {
        "status": 200,
        "statusText": "OK",
        "httpVersion": "HTTP/1.1",
        "headers": [],
        "cookies": [],
        "content": {"size": 0, "mimeType": "text/html"},
        "redirectURL": "",
        "headersSize": -1,
        "bodySize": 0,
    },
    "cache": {},
    "timings": {"send": 0, "wait": 1, "receive": 0},
}


def _values(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from webarena_verified.core.evaluation.value_comparator import ValueComparator
    from webarena_verified.core.evaluation.value_normalizer import ValueNormalizer

    normalizer, comparator = ValueNormalizer(), ValueComparator()
    verdicts = []
    for case in cases:
        try:
            if case["op"] == "list":
                expected = normalizer.normalize_array(case["expected"], case["schema"], strict=True)
                actual = normalizer.normalize_array(case["actual"], case["schema"], strict=False)
            else:
                expected = normalizer.normalize(case["expected"], case["schema"], strict=True)
                actual = normalizer.normalize(case["actual"], case["schema"], strict=False)
            found = comparator.compare(
                actual=actual, expected=expected, ordered=case.get("ordered", False), value_name="value"
            )
            verdict = "mismatch" if found else "match"
            detail = "; ".join(a.assertion_name for a in found)
        except Exception as error:
            verdict, detail = "error", f"{type(error).__name__}: {error}"
        verdicts.append({"verdict": verdict, "detail": detail})
    return verdicts


def _responses(
    tasks: list[dict[str, Any]], cases: list[dict[str, Any]], request_config: dict[str, Any] | None
) -> list[dict[str, Any]]:
    from webarena_verified.api import WebArenaVerified
    from webarena_verified.types.config import WebArenaVerifiedConfig
    from webarena_verified.types.eval import TaskEvalContext
    from webarena_verified.types.task import WebArenaVerifiedTask
    from webarena_verified.types.tracing import NetworkTrace

    # The reference only loads complete 812-task datasets, so the official one is loaded and
    # each case's task is handed to its evaluator in a context, as its batch command does.
    site_config = request_config.get("environments") if request_config else None
    config = WebArenaVerifiedConfig(environments=site_config) if site_config else None
    oracle = WebArenaVerified(config=config)
    # The reference hashes its dataset file for every result; point it at a tiny file so that
    # thousands of cases do not re-read the full dataset (the hash is not part of any verdict).
    checksum_stub = Path(tempfile.mkdtemp()) / "tasks.json"
    checksum_stub.write_text(json.dumps(tasks[:1]))
    object.__setattr__(oracle.config, "test_data_file", checksum_stub)
    by_id = {task["task_id"]: WebArenaVerifiedTask.model_validate(task) for task in tasks}
    empty_trace = NetworkTrace.from_content([_PLACEHOLDER_ENTRY])
    verdicts = []
    for case in cases:
        context = TaskEvalContext(
            task=by_id[case["task_id"]],
            agent_response_raw=case["response"],
            network_trace=empty_trace,
            config=oracle.config,
        )
        result = oracle._evaluator.evaluate_task(context=context)
        response_results = [
            r for r in result.evaluators_results if r.evaluator_name == "AgentResponseEvaluator"
        ]
        if not response_results:
            verdicts.append({"status": str(result.status), "score": result.score, "detail": result.error_msg})
            continue
        found = response_results[0]
        detail = found.error_msg or "; ".join(a.assertion_name for a in found.assertions or ())
        verdicts.append({"status": str(found.status), "score": found.score, "detail": detail})
    return verdicts


def _files(config: str, cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from webarena_verified.api import WebArenaVerified

    oracle = WebArenaVerified(config=Path(config))
    verdicts = []
    for case in cases:
        result = oracle.evaluate_task(
            task_id=case["task_id"], agent_response=Path(case["response"]), network_trace=Path(case["har"])
        )
        detail = result.error_msg or ""
        verdicts.append({"status": str(result.status), "score": result.score, "detail": detail})
    return verdicts


def main() -> None:
    logging.disable(logging.CRITICAL)
    request = json.load(sys.stdin)
    if request["mode"] == "values":
        verdicts = _values(request["cases"])
    elif request["mode"] == "files":
        verdicts = _files(request["config"], request["cases"])
    else:
        verdicts = _responses(request["tasks"], request["cases"], request.get("config"))
    json.dump(verdicts, sys.stdout)


if __name__ == "__main__":
    main()
