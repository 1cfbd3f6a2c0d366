"""Differential test: answers that hold real site URLs are derendered and judged as the reference does.

The reference runs in its own interpreter (tests/support/oracle_values.py) with the
same site config; each answer is judged against string- and URL-typed
expectations on both sides.
"""

from __future__ import annotations

import json
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any

from tests.support.oracle_bridge import ask_oracle, report_differences
from tests.support.value_parity_cases import first_choice
from webarena_live.evaluator.response_evaluator import evaluate_response
from webarena_live.evaluator.sites import SiteMap
from webarena_live.evaluator.tasks import parse_task

SITE_CONFIG = {
    "environments": {
        "__SHOPPING__": {"urls": ["http://127.0.0.1:7770", "http://shop.test:7770/"]},
        "__GITLAB__": {"urls": ["http://127.0.0.1:8023"]},
        "__REDDIT__": {"urls": ["http://127.0.0.1:9999"]},
    }
}


def _url_task(task_id: int, sites: list[str], expected: list[Any], kind: str) -> dict[str, Any]:
    items = {"type": "string", "format": "url"} if kind == "url" else {"type": "string"}
    return {
        "sites": sites,
        "task_id": task_id,
        "intent_template_id": 1,
        "start_urls": [f"__{sites[0].upper()}__"],
        "intent": "Which page?",
        "intent_template": "Which page?",
        "instantiation_dict": {},
        "revision": 1,
        "eval": [
            {
                "evaluator": "AgentResponseEvaluator",
                "results_schema": {"type": "array", "items": items},
                "expected": {"task_type": "retrieve", "status": "SUCCESS", "retrieved_data": expected},
            }
        ],
    }


def test_answers_holding_real_site_urls_are_derendered_like_the_oracle(oracle_python: Path) -> None:
    expectations = [
        (["shopping"], ["__SHOPPING__/checkout/cart"]),
        (["shopping"], ["__SHOPPING__/catalog/product/view/id/42?tab=reviews"]),
        (["gitlab", "reddit"], ["__GITLAB__/byteblaze/dotfiles", "__REDDIT__/f/books"]),
        (["gitlab"], ["git@__SSH_HOST__:convexegg/chatgpt.git"]),
        (["reddit"], [["__REDDIT__/f/books", "__REDDIT__/f/Books"]]),
        (["shopping"], ["Go to __SHOPPING__/sales/order/view/order_id/7 and press Print"]),
    ]
    answers = [
        "http://127.0.0.1:7770/checkout/cart",
        "http://shop.test:7770/checkout/cart",
        "http://127.0.0.1:7770/checkout/cart/",
        "HTTP://127.0.0.1:7770/Checkout/Cart",
        "http://127.0.0.1:7770/catalog/product/view/id/42?tab=reviews",
        "http://127.0.0.1:7770/catalog/product/view/id/42?tab=specs",
        "http://127.0.0.1:8023/byteblaze/dotfiles",
        "http://127.0.0.1:9999/f/books",
        "http://127.0.0.1:8023/f/books",
        "__REDDIT__/f/books",
        "ssh://git@127.0.0.1:2222/convexegg/chatgpt.git",
        "git@127.0.0.1:convexegg/chatgpt.git",
        "Go to http://127.0.0.1:7770/sales/order/view/order_id/7 and press Print",
        "/checkout/cart",
        "http://elsewhere.test/checkout/cart",
    ]
    kinds = ("string", "url")
    tasks, cases = [], []
    for number, (sites, expected) in enumerate(expectations):
        for kind in kinds:
            task = _url_task(9000 + 2 * number + kinds.index(kind), sites, expected, kind)
            tasks.append(task)
            for answer in answers:
                data = [answer] if len(expected) == 1 else [answer, answer]
                response = {"task_type": "retrieve", "status": "SUCCESS", "retrieved_data": data}
                cases.append({"task_id": task["task_id"], "label": f"{kind} {answer}", "response": response})
            golden = [first_choice(item, {"type": "string"}) for item in expected]
            rendered = [
                str(item)
                .replace("__SHOPPING__", "http://127.0.0.1:7770")
                .replace("__GITLAB__", "http://127.0.0.1:8023")
                .replace("__REDDIT__", "http://127.0.0.1:9999")
                for item in golden
            ]
            for label, data in (("golden", golden), ("rendered", rendered)):
                response = {"task_type": "retrieve", "status": "SUCCESS", "retrieved_data": data}
                cases.append({"task_id": task["task_id"], "label": f"{kind} {label}", "response": response})
    cases = json.loads(json.dumps(cases))
    oracle = ask_oracle(
        oracle_python, {"mode": "responses", "tasks": tasks, "cases": cases, "config": SITE_CONFIG}
    )
    site_map = SiteMap.from_dict(SITE_CONFIG)
    parsed = {t["task_id"]: parse_task(t) for t in tasks}
    ours = []
    for case in cases:
        task = parsed[case["task_id"]]
        derender = partial(site_map.derender, sites=task.sites)
        result = evaluate_response(task.response_config, case["response"], task=task, derender_url=derender)
        ours.append((result.status.value, result.score))
    differences = report_differences("site urls", cases, oracle, ours)
    statuses = Counter(v["status"] for v in oracle)
    assert statuses["success"] >= 20 and statuses["failure"] >= 20
    assert not differences, "\n".join(differences[:40])
