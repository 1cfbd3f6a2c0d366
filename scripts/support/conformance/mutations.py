"""Mutations of golden runs: changes that must fail, and changes that must still pass.

Each group is one run directory, so each task appears at most once per group;
a group rotates through its kinds of mutation by task id (among the kinds that
apply to the task) so that every kind is exercised on many tasks. Whether a
mutation passes is never decided here: the oracle decides, and the suite only
checks that we agree with it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from scripts.support.conformance import golden as g
from scripts.support.conformance import har_entries as har
from scripts.support.conformance.mutate_common import golden_entries, make_case
from scripts.support.conformance.mutate_network import (
    network_features,
    network_missing,
    network_variants,
    network_wrong,
)
from scripts.support.conformance.mutate_response import (
    response_format,
    response_text,
    response_values,
    response_wrong,
    seed_names,
)
from scripts.support.conformance.runs import RawText, RunCase

# ---------------------------------------------------------------- unreadable inputs


def broken_inputs(task: dict[str, Any], targets: list[g.Target], response: dict[str, Any]) -> list[RunCase]:
    entries = golden_entries(task, targets)
    good = json.dumps(har.har_document(entries))
    return [
        make_case(task, "har_not_json", response, None, raw_har=good[: len(good) // 2]),
        make_case(task, "har_without_entries", response, None, raw_har=json.dumps(har.har_document([]))),
        make_case(task, "har_without_log", response, None, raw_har=json.dumps({"entries": entries})),
        make_case(task, "empty_response_file", RawText(""), entries),
        make_case(task, "response_is_a_list", [response], entries),
        make_case(task, "response_null", None, entries),
    ]


def golden_case(task: dict[str, Any], targets: list[g.Target], response: dict[str, Any]) -> list[RunCase]:
    return [make_case(task, "golden", response, golden_entries(task, targets))]


GROUPS: dict[str, Callable[[dict[str, Any], list[g.Target], dict[str, Any]], list[RunCase]]] = {
    "golden": golden_case,
    "response_wrong": response_wrong,
    "response_format": response_format,
    "response_text": response_text,
    "response_values": response_values,
    "seed_names": seed_names,
    "network_wrong": network_wrong,
    "network_missing": network_missing,
    "network_variants": network_variants,
    "network_features": network_features,
    "broken_inputs": broken_inputs,
}
"""Group name -> all the cases of that group that apply to a task (one is picked per task)."""

SAMPLED_GROUPS = {"broken_inputs": 5}
"""Groups run on every n-th task only (the behaviour under test does not depend on the task)."""


def pick(task_id: int, candidates: list[RunCase]) -> RunCase | None:
    """One case per task and group, rotating through the kinds by task id."""
    if not candidates:
        return None
    return candidates[task_id % len(candidates)]
