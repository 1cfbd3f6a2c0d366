"""Tasks of our own for the network parity tests, where a library's behaviour decides the verdict (a
dependency's new version must not change it): each a task document and the HAR entries of its run."""

from __future__ import annotations

import json
from typing import Any

from tests.support.network_cases import NAV_HEADERS, SITE_MAP, XHR_HEADERS, entry


def _own_task(task_id: int, post_data: dict[str, Any]) -> dict[str, Any]:
    """A mutate task of its own (not in the official dataset) expecting one JSON POST."""
    return {
        "sites": ["shopping"],
        "task_id": task_id,
        "intent_template_id": task_id,
        "start_urls": ["__SHOPPING__/"],
        "intent": "Save the list",
        "intent_template": "Save the list",
        "instantiation_dict": {},
        "revision": 1,
        "eval": [
            {
                "evaluator": "AgentResponseEvaluator",
                "results_schema": {"type": "null"},
                "expected": {"task_type": "mutate", "status": "SUCCESS", "retrieved_data": None},
            },
            {
                "evaluator": "NetworkEventEvaluator",
                "expected": {"url": "__SHOPPING__/rest/lists", "http_method": "POST", "post_data": post_data},
            },
        ],
    }


def _posting(body: dict[str, Any]) -> list[dict[str, Any]]:
    base = SITE_MAP.render("__SHOPPING__", sites=("shopping",))
    return [
        entry("GET", f"{base}/", headers=NAV_HEADERS),
        entry(
            "POST",
            f"{base}/rest/lists",
            headers=XHR_HEADERS,
            post=(json.dumps(body), "application/json"),
            content=('{"ok": true}', "application/json"),
        ),
    ]


# Hand-written cases on tasks of their own, where a library's behaviour decides the verdict
# (a dependency's new version must not change it). name -> (task document, HAR entries).
# "json_text_index": a JSON array given as JSON text inside a string field; jsonpath-ng 1.7.0 (the
# reference's pin) indexes the string itself, so `$.array[2]` is one character and the verdict is
# failure (newer jsonpath-ng finds nothing there, and decoding the text would then give success).
HAND_WRITTEN: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]] = {
    "json_text_index": (
        _own_task(900001, {"$.array[2]": "item3"}),
        _posting({"array": '["item1","item2","item3"]'}),
    ),
    "json_text_field": (
        _own_task(900002, {"$.payload.list.name": "groceries"}),
        _posting({"payload": '{"list": {"name": "groceries"}}'}),
    ),
    "json_array_index": (
        _own_task(900003, {"$.array[2]": "item3"}),
        _posting({"array": ["item1", "item2", "item3"]}),
    ),
}
