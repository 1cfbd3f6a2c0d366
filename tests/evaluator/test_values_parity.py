"""Differential tests: our value normalization and response verdicts against the reference's.

The reference runs in its own interpreter (the `oracle_python` fixture) through
tests/support/oracle_values.py; both sides judge the same generated inputs and the
verdicts must agree. Each test prints its `agreement: N/M` figure. A quick run (tests/support/quick.py)
judges `quick.sample`'s share of each kind (label) of answer variant.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.support import quick
from tests.support.oracle_bridge import ask_oracle, report_differences
from tests.support.response_parity_cases import response_variants
from tests.support.value_parity_cases import first_choice, spellings
from webarena_live.evaluator.compare import compare
from webarena_live.evaluator.errors import AgentResponseError
from webarena_live.evaluator.response_evaluator import evaluate_response
from webarena_live.evaluator.responses import parse_response
from webarena_live.evaluator.tasks import Task, parse_task
from webarena_live.evaluator.values import normalize, normalize_list


@pytest.fixture(scope="module")
def official_tasks(official_dataset: Path) -> list[dict[str, Any]]:
    tasks: list[dict[str, Any]] = json.loads(official_dataset.read_text())
    assert len(tasks) == 812
    return tasks


def _response_config(raw_task: dict[str, Any]) -> dict[str, Any]:
    return next(e for e in raw_task["eval"] if e["evaluator"] == "AgentResponseEvaluator")


def _our_response_verdicts(
    raw_tasks: list[dict[str, Any]], cases: list[dict[str, Any]]
) -> list[tuple[str, float]]:
    tasks: dict[int, Task] = {t["task_id"]: parse_task(t) for t in raw_tasks}
    verdicts = []
    for case in cases:
        task = tasks[case["task_id"]]
        result = evaluate_response(task.response_config, case["response"], task=task)
        verdicts.append((result.status.value, result.score))
    return verdicts


@pytest.fixture(scope="module")
def response_cases(official_tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every answer variant of every official task, as JSON (what both sides see)."""
    cases = []
    for raw in official_tasks:
        config = _response_config(raw)
        for label, response in response_variants(config["expected"], config["results_schema"]):
            cases.append({"task_id": raw["task_id"], "label": label, "response": response})
    cases = quick.sample(cases, lambda case: case["label"])
    loaded: list[dict[str, Any]] = json.loads(json.dumps(cases))
    return loaded


@pytest.fixture(scope="module")
def oracle_response_verdicts(
    oracle_python: Path, official_tasks: list[dict[str, Any]], response_cases: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    return ask_oracle(oracle_python, {"mode": "responses", "tasks": official_tasks, "cases": response_cases})


def test_response_verdicts_match_the_oracle_on_every_official_task(
    official_tasks: list[dict[str, Any]],
    response_cases: list[dict[str, Any]],
    oracle_response_verdicts: list[dict[str, Any]],
) -> None:
    ours = _our_response_verdicts(official_tasks, response_cases)
    differences = report_differences("responses", response_cases, oracle_response_verdicts, ours)
    statuses = Counter(v["status"] for v in oracle_response_verdicts)
    # The generated answers must exercise every verdict, or agreement would mean little.
    assert statuses["success"] > quick.share(1000) and statuses["failure"] > quick.share(1000)
    assert statuses["error"] > quick.share(100)
    assert not differences, "\n".join(differences[:40])


def test_golden_answers_pass_under_the_oracle_for_nearly_every_task(
    official_tasks: list[dict[str, Any]],
    response_cases: list[dict[str, Any]],
    oracle_response_verdicts: list[dict[str, Any]],
) -> None:
    golden = [
        (case, verdict)
        for case, verdict in zip(response_cases, oracle_response_verdicts, strict=True)
        if case["label"] == "golden"
    ]
    assert len(golden) == len(quick.sample(official_tasks, lambda _: "golden"))  # one a task (sampled alike)
    passing = sum(1 for _, verdict in golden if verdict["status"] == "success")
    print(f"golden answers passing under the oracle: {passing}/{len(golden)}")
    assert passing >= 0.95 * len(golden)
    cases, verdicts = [case for case, _ in golden], [verdict for _, verdict in golden]
    differences = report_differences("golden", cases, verdicts, _our_response_verdicts(official_tasks, cases))
    assert not differences, "\n".join(differences)


def test_seed_field_names_are_judged_like_the_official_names(
    official_tasks: list[dict[str, Any]],
    response_cases: list[dict[str, Any]],
    oracle_response_verdicts: list[dict[str, Any]],
) -> None:
    """Decided divergence: `action`/`results` get the oracle's verdict for `task_type`/`retrieved_data`."""
    seed, oracle = [], []
    for case, verdict in zip(response_cases, oracle_response_verdicts, strict=True):
        response = case["response"]
        if not isinstance(response, dict) or "task_type" not in response or "performed_operation" in response:
            continue
        renamed = {
            ("action" if k == "task_type" else "results" if k == "retrieved_data" else k): v
            for k, v in response.items()
        }
        seed.append({**case, "label": f"{case['label']} (seed names)", "response": renamed})
        oracle.append(verdict)
    assert len(seed) > quick.share(10000)
    ours = _our_response_verdicts(official_tasks, seed)
    differences = report_differences("seed names", seed, oracle, ours)
    assert not differences, "\n".join(differences[:40])


def _value_cases(official_tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Request-body values (post data, query strings) of every network evaluator, respelled."""
    cases = []
    for raw in official_tasks:
        for config in raw["eval"]:
            if config["evaluator"] != "NetworkEventEvaluator":
                continue
            for field, schema_field in (
                ("post_data", "post_data_schema"),
                ("query_params", "query_params_schema"),
            ):
                expected = config["expected"].get(field)
                schema = config.get(schema_field)
                if not isinstance(expected, dict) or not schema:
                    continue
                golden = first_choice(expected, schema)
                cases.append(
                    {
                        "task_id": raw["task_id"],
                        "label": f"{field} golden",
                        "op": "value",
                        "schema": schema,
                        "expected": expected,
                        "actual": golden,
                    }
                )
                for number, variant in enumerate(spellings(golden, schema)):
                    cases.append(
                        {
                            "task_id": raw["task_id"],
                            "label": f"{field} spelling {number}",
                            "op": "value",
                            "schema": schema,
                            "expected": expected,
                            "actual": variant,
                        }
                    )
    return cases


def _synthetic_list_cases() -> list[dict[str, Any]]:
    """Every value type as a retrieved-data list, including types the dataset uses rarely."""
    samples: dict[str, list[Any]] = {
        "string": ["Quest Lumaflex\u2122 Band", "Buffalo-Niagara International Airport", "^.*pending.*$", 0],
        "number": [1234.5, "1,234", 0, "twenty three"],
        "integer": [7, "7"],
        "boolean": [True, False, "yes"],
        "null": [None, "N/A"],
        "currency": [1234.5, "$19.99", [10, 17], 0],
        "date": ["2023-01-05", "Jan 5, 2023", ["2022-12-31", "2023-01-01"]],
        "month": ["January", 3, ["May", "June"]],
        "duration": ["1h 30m", "45 min", ["10 minutes", "2 hours"]],
        "distance": ["5 km", "3.1 miles", ["450 m", "1 km"]],
        "coordinates": [[40.4433, -79.9436], {"lat": 40.44, "lon": -79.94}, "40.4433, -79.9436"],
        "location-name": ["Carnegie Mellon University", ["Pittsburgh Airport", "PIT"]],
        "json": ['{"b": 1, "a": [2, 1]}', "[]"],
        "markdown": ["##  Title\n\n\n* item\n+ other", "[a link\n split](http://x.org )"],
        "base64": ["SGVsbG8gV29ybGQ=", "^.*Hello.*$"],
        "string_list": ["632,64,86", "a, b ,c"],
        "full_address": [
            {
                "house_number": "5000",
                "street": "Forbes Avenue",
                "city": "Pittsburgh",
                "state": "Pennsylvania",
                "postcode": "15213",
            }
        ],
    }
    respelled: dict[str, list[Any]] = {
        "json": ['{"a":[2,1],"b":1}', '{"a": [1, 2], "b": 1}', "{bad", 5],
        "markdown": ["## Title\n\n- item\n- other", "# Title", 7],
        "base64": ["SGVsbG8gV29ybGQ", "SGVsbG8gV29ybGQ=\n", "Hello World", "aGVsbG8gd29ybGQ="],
        "string_list": ["86,632,64", "632, 64", "", 632],
        "null": ["none", "NULL", " n / a ", 0, False, "nothing"],
        "full_address": [
            {
                "house_number": "5000",
                "street": "Forbes Ave",
                "city": "PITTSBURGH",
                "state": "PA",
                "postcode": "15213-0000",
            },
            {
                "house_number": "5000",
                "street": "Forbes Ave",
                "city": "Pittsburgh",
                "state": "PA",
                "postcode": "15213",
            },
            "5000 Forbes Ave, Pittsburgh PA",
        ],
    }
    cases = []
    for kind, values in samples.items():
        schema = {
            "type": "array",
            "items": {"format": kind}
            if kind not in ("string", "number", "integer", "boolean", "null")
            else {"type": kind},
        }
        for value in values:
            golden = first_choice(value, schema["items"])
            variants = [golden, *spellings(golden, schema["items"]), *respelled.get(kind, [])]
            for number, variant in enumerate(variants):
                for ordered in (False, True):
                    cases.append(
                        {
                            "task_id": 0,
                            "label": f"{kind} {value!r} variant {number}",
                            "op": "list",
                            "schema": schema,
                            "expected": [value, golden],
                            "actual": [golden, variant],
                            "ordered": ordered,
                        }
                    )
    return cases


def _quirk_cases() -> list[dict[str, Any]]:
    """Hand-written cases for the reference's odd corners (see docs/notes/divergences.md)."""
    objects = {
        "type": "array",
        "items": {
            "type": "object",
            "properties": {"names": {"type": "array", "items": {"type": "string"}}, "n": {"type": "number"}},
        },
    }
    prices = {"type": "array", "items": {"type": "number", "format": "currency"}}
    points = {"type": "array", "items": {"format": "coordinates"}}
    texts = {"type": "array", "items": {"type": "string"}}
    raw = [
        # two empty lists in one answer: the shared empty tuple reads as a circular structure
        (
            objects,
            [{"names": [], "n": 1}, {"names": [], "n": 2}],
            [{"names": [], "n": 1}, {"names": [], "n": 2}],
        ),
        (objects, [{"names": ["a"], "n": 1}], [{"names": '["a"]', "n": "1"}]),
        (objects, [{"names": ["a"], "n": 1}], ['{"names": ["a"], "n": 1}']),
        (objects, [{"names": ["a"], "n": 1}], [[{"names": ["a"], "n": 1}]]),
        # currency and coordinates only look at the first alternative
        (prices, [[10, 17]], [17]),
        (prices, [[10, 17]], [10.08]),
        (points, [[[40.1, -79.9], [40.2, -79.8]]], [[40.2, -79.8]]),
        # regexes written by the agent match the expected text
        (texts, ["Pittsburgh"], ["^.*$"]),
        (texts, ["^pitts.*$"], ["^.*$"]),
        (texts, ["a", "b"], ["^[ab]$", "^[ab]$"]),
        # malformed regexes are literals
        (texts, ["^(unclosed$"], ["^(unclosed$"]),
        (texts, ["^(unclosed$"], ["(unclosed"]),
    ]
    cases = []
    for number, (schema, expected, actual) in enumerate(raw):
        for ordered in (False, True):
            cases.append(
                {
                    "task_id": 0,
                    "label": f"quirk {number}",
                    "op": "list",
                    "schema": schema,
                    "expected": expected,
                    "actual": actual,
                    "ordered": ordered,
                }
            )
    return cases


def _our_value_verdict(case: dict[str, Any]) -> str:
    try:
        if case["op"] == "list":
            expected = normalize_list(case["expected"], case["schema"], strict=True)
            actual = normalize_list(case["actual"], case["schema"], strict=False)
        else:
            expected = normalize(case["expected"], case["schema"], strict=True)
            actual = normalize(case["actual"], case["schema"], strict=False)
        found = compare(actual, expected, ordered=case.get("ordered", False), value_name="value")
    except Exception:
        return "error"
    return "mismatch" if found else "match"


def test_value_verdicts_match_the_oracle(oracle_python: Path, official_tasks: list[dict[str, Any]]) -> None:
    cases = json.loads(json.dumps(_value_cases(official_tasks) + _synthetic_list_cases() + _quirk_cases()))
    oracle = ask_oracle(oracle_python, {"mode": "values", "cases": cases})
    differences = []
    for case, theirs in zip(cases, oracle, strict=True):
        mine = _our_value_verdict(case)
        if mine != theirs["verdict"]:
            differences.append(
                f"task {case['task_id']} [{case['label']}] schema={json.dumps(case['schema'])[:150]} "
                f"expected={json.dumps(case['expected'])[:150]} actual={json.dumps(case['actual'])[:150]}: "
                f"oracle {theirs['verdict']} ({theirs['detail'][:150]}), ours {mine}"
            )
    verdicts = Counter(v["verdict"] for v in oracle)
    print(f"values agreement: {len(cases) - len(differences)}/{len(cases)}")
    print(f"values oracle verdicts: {dict(verdicts)}")
    assert verdicts["match"] > 200 and verdicts["mismatch"] > 200 and verdicts["error"] >= 2
    assert not differences, "\n".join(differences[:40])


def test_the_official_form_written_to_disk_gets_the_live_verdict_from_the_oracle(
    oracle_python: Path,
    official_tasks: list[dict[str, Any]],
    response_cases: list[dict[str, Any]],
) -> None:
    """`agent_response.json` holds `to_official_dict()`; the oracle must judge it as we judged the raw answer.

    Answers use the seed's names (the case that needs rewriting); every golden answer and a third of
    the other variants are checked.
    """
    raw_cases, written = [], []
    for index, case in enumerate(response_cases):
        response = case["response"]
        if not isinstance(response, dict) or "task_type" not in response:
            continue
        if case["label"] != "golden" and index % 3:
            continue
        renamed = {
            ("action" if k == "task_type" else "results" if k == "retrieved_data" else k): v
            for k, v in response.items()
        }
        try:
            official = parse_response(renamed).to_official_dict()
        except AgentResponseError:
            continue  # written exactly as received: nothing to check
        raw_cases.append({**case, "response": renamed})
        written.append({**case, "response": json.dumps(official, indent=2)})
    assert len(written) > quick.share(5000)
    oracle = ask_oracle(oracle_python, {"mode": "responses", "tasks": official_tasks, "cases": written})
    ours = _our_response_verdicts(official_tasks, raw_cases)
    differences = report_differences("written answers", raw_cases, oracle, ours)
    assert not differences, "\n".join(differences[:40])
