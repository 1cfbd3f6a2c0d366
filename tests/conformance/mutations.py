"""Mutations of golden runs: changes that must fail, and changes that must still pass.

Each group is one run directory, so each task appears at most once per group;
a group rotates through its kinds of mutation by task id (among the kinds that
apply to the task) so that every kind is exercised on many tasks. Whether a
mutation passes is never decided here: the oracle decides, and the suite only
checks that we agree with it.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Callable
from typing import Any

import dateutil.parser

from conformance import golden as g
from conformance import har_entries as har
from conformance.runs import RawText, RunCase

Mutation = Callable[[dict[str, Any], list[g.Target], dict[str, Any]], RunCase | None]
"""(task, golden targets, golden response) -> the mutated run, or None when it does not apply."""


def _golden_entries(task: dict[str, Any], targets: list[g.Target], **options: Any) -> list[dict[str, Any]]:
    return g.build_entries(task, targets, **options)


def _schema(task: dict[str, Any]) -> dict[str, Any]:
    config = next(e for e in task["eval"] if e["evaluator"] == "AgentResponseEvaluator")
    return config.get("results_schema") or {}


def _item_schema(task: dict[str, Any]) -> dict[str, Any]:
    return _schema(task).get("items") or {}


def _first_live(targets: list[g.Target]) -> int | None:
    return next((i for i, t in enumerate(targets) if not t.should_not_exist), None)


# ---------------------------------------------------------------- value variants


def wrong_value(value: Any, schema: dict[str, Any]) -> Any:
    """A value of the same type that should not match."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 7
    if isinstance(value, dict):
        props = schema.get("properties", {})
        for key, item in value.items():
            if item is not None:
                return {**value, key: wrong_value(item, props.get(key, {}))}
        return {**value, "unexpected": "value"}
    if isinstance(value, list):
        return [*value, "unexpected extra"]
    if isinstance(value, str):
        return value + " and something else entirely"
    return "not null"


def format_variant(value: Any, schema: dict[str, Any]) -> Any:
    """The same value written another way (case, spacing, currency sign, date style, ...)."""
    fmt = schema.get("format")
    if isinstance(value, dict):
        props = schema.get("properties", {})
        return {k: format_variant(v, props.get(k, {})) for k, v in value.items()}
    if isinstance(value, list):
        return [format_variant(v, schema.get("items", {})) for v in value]
    if isinstance(value, bool):
        return "yes" if value else "no"
    if fmt == "currency" and isinstance(value, int | float):
        return f"${value:,.2f}"
    if isinstance(value, int | float):
        return str(value)
    if not isinstance(value, str):
        return value
    if fmt == "date":
        try:
            return dateutil.parser.parse(value).strftime("%Y-%m-%d")
        except (ValueError, OverflowError):
            return value.upper()
    if fmt == "month":
        full = {m[:3].lower(): m for m in _MONTHS}
        return full.get(value[:3].lower(), value).upper() if len(value) <= 3 else value[:3]
    if fmt == "duration":
        return value.replace("min", " minutes").replace("h ", " hours ")
    if fmt == "distance":
        return value.replace("km", " km").replace("m", " m") if "km" not in value else value.replace("km", " km")
    return f"  {value.upper()} "


_MONTHS = [
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
]  # fmt: skip


def _with_data(response: dict[str, Any], data: Any) -> dict[str, Any]:
    return {**response, "retrieved_data": data}


def _case(task: dict[str, Any], name: str, response: Any, entries: list[dict[str, Any]] | None, **kw: Any) -> RunCase:
    return RunCase(task_id=task["task_id"], case=name, response=response, entries=entries, **kw)


# ---------------------------------------------------------------- response groups


def response_wrong(task: dict[str, Any], targets: list[g.Target], response: dict[str, Any]) -> list[RunCase]:
    entries = _golden_entries(task, targets)
    data = response.get("retrieved_data")
    out = []
    if data:
        out.append(_case(task, "wrong_value", _with_data(response, [wrong_value(data[0], _item_schema(task)),
                                                                    *data[1:]]), entries))  # fmt: skip
        out.append(_case(task, "missing_item", _with_data(response, data[:-1] or None), entries))
        out.append(_case(task, "extra_item", _with_data(response, [*data, data[0]]), entries))
    other_status = "NOT_FOUND_ERROR" if response["status"].upper() == "SUCCESS" else "SUCCESS"
    out.append(_case(task, "wrong_status", {**response, "status": other_status}, entries))
    kinds = ["retrieve", "navigate", "mutate"]
    other_type = kinds[(kinds.index(response["task_type"].lower()) + 1) % 3]
    out.append(_case(task, "wrong_task_type", {**response, "task_type": other_type}, entries))
    if not data:
        out.append(_case(task, "unexpected_data", _with_data(response, ["surprise"]), entries))
    return out


def response_format(task: dict[str, Any], targets: list[g.Target], response: dict[str, Any]) -> list[RunCase]:
    entries = _golden_entries(task, targets)
    data = response.get("retrieved_data")
    out = []
    if data:
        out.append(_case(task, "value_format", _with_data(response, format_variant(data, _schema(task))), entries))
        if len(data) > 1:
            out.append(_case(task, "reordered", _with_data(response, list(reversed(data))), entries))
        out.append(_case(task, "scalar_not_list", _with_data(response, data[0]), entries))
    else:
        out.append(_case(task, "empty_list_for_null", _with_data(response, []), entries))
        without = {k: v for k, v in response.items() if k != "retrieved_data"}
        out.append(_case(task, "data_key_absent", without, entries))
    out.append(_case(task, "enum_case", {**response, "task_type": response["task_type"].upper(),
                                         "status": response["status"].lower().title()}, entries))  # fmt: skip
    out.append(_case(task, "with_error_details", {**response, "error_details": "  none  "}, entries))
    return out


def response_text(task: dict[str, Any], targets: list[g.Target], response: dict[str, Any]) -> list[RunCase]:
    entries = _golden_entries(task, targets)
    body = json.dumps(response, indent=2, ensure_ascii=False)
    legacy = {("performed_operation" if k == "task_type" else k): v for k, v in response.items()}
    return [
        _case(task, "code_fence_json", RawText(f"```json\n{body}\n```"), entries),
        _case(task, "code_fence_plain", RawText(f"Here is my answer:\n```\n{body}\n```\nDone."), entries),
        _case(task, "padded_json_text", RawText(f"\n\n   {body}   \n"), entries),
        _case(task, "legacy_performed_operation", legacy, entries),
        _case(task, "not_json_text", RawText(f"The answer is {response.get('retrieved_data')}"), entries),
    ]


def seed_names(task: dict[str, Any], targets: list[g.Target], response: dict[str, Any]) -> list[RunCase]:
    renamed = {"action": response["task_type"], "status": response["status"],
               "results": response.get("retrieved_data")}  # fmt: skip
    return [_case(task, "seed_action_results", renamed, _golden_entries(task, targets))]


# ---------------------------------------------------------------- network groups


def _replace(targets: list[g.Target], index: int, **changes: Any) -> list[g.Target]:
    changed = list(targets)
    changed[index] = dataclasses.replace(targets[index], **changes)
    return changed


def _wrong_post(target: g.Target) -> dict[str, Any] | None:
    if not target.post:
        return None
    post = copy.deepcopy(target.post)
    for key, value in post.items():
        if key != "form_key" and value is not None:
            post[key] = wrong_value(value, {})
            return post
    return None


def network_wrong(task: dict[str, Any], targets: list[g.Target], response: dict[str, Any]) -> list[RunCase]:
    index = _first_live(targets)
    if index is None:
        if not targets:
            return []
        # Only should_not_exist evaluators: doing the forbidden thing must fail.
        include = [True] * len(targets)
        return [_case(task, "forbidden_event_present", response, _golden_entries(task, targets, include=include))]
    target = targets[index]
    out = []
    wrong_status = 500 if target.status != 500 else 200
    out.append(_case(task, "wrong_status_code", response,
                     _golden_entries(task, _replace(targets, index, status=wrong_status))))  # fmt: skip
    other = "POST" if target.method == "GET" else "GET"
    out.append(_case(task, "other_method", response, _golden_entries(task, _replace(targets, index, method=other))))
    post = _wrong_post(target)
    if post is not None:
        out.append(_case(task, "wrong_post_value", response, _golden_entries(task, _replace(targets, index, post=post))))
    if target.config["expected"].get("query_params"):
        url = target.url.replace("=", "=zz", 1)
        out.append(_case(task, "wrong_query_value", response, _golden_entries(task, _replace(targets, index, url=url))))
    if target.response_json is not None:
        content = {k: wrong_value(v, {}) for k, v in target.response_json.items()}
        out.append(_case(task, "wrong_response_content", response,
                         _golden_entries(task, _replace(targets, index, response_json=content))))  # fmt: skip
    if target.response_cookies:
        cookies = {k: "nothing relevant" for k in target.response_cookies}
        out.append(_case(task, "wrong_cookie", response,
                         _golden_entries(task, _replace(targets, index, response_cookies=cookies))))  # fmt: skip
    return out


def network_missing(task: dict[str, Any], targets: list[g.Target], response: dict[str, Any]) -> list[RunCase]:
    index = _first_live(targets)
    if index is None:
        return []
    target = targets[index]
    include = [not t.should_not_exist for t in targets]
    include[index] = False
    out = [_case(task, "target_missing", response, _golden_entries(task, targets, include=include))]
    if target.referer:
        moved = target.referer.rstrip("/") + "/elsewhere"
        out.append(_case(task, "changed_referer", response,
                         _golden_entries(task, _replace(targets, index, referer=moved))))  # fmt: skip
    later = g.target_entry(dataclasses.replace(target, status=404 if target.status != 404 else 200))
    out.append(_case(task, "later_event_differs", response, _golden_entries(task, targets, after_each={index: [later]})))
    base = g.SITE_URLS[task["sites"][0]]
    stray = har.navigation(f"{base}/some/other/page", referer=target.url)
    out.append(_case(task, "later_navigation_elsewhere", response,
                     _golden_entries(task, targets, after_each={index: [stray]})))  # fmt: skip
    sep = "&" if "?" in target.url else "?"
    out.append(_case(task, "extra_query_param", response,
                     _golden_entries(task, _replace(targets, index, url=f"{target.url}{sep}utm_source=agent"))))  # fmt: skip
    return out


def _ignored_param(config: dict[str, Any]) -> str | None:
    names = config.get("ignored_query_params") or []
    if names:
        return names[0]
    for pattern in config.get("ignored_query_params_patterns") or []:
        for candidate in ("page", "sort", "isAjax", "_", "paging[current]", "sorting[field]", "serializer", "zzz"):
            import re

            if re.search(pattern, candidate, re.IGNORECASE):
                return candidate
    return None


def network_variants(task: dict[str, Any], targets: list[g.Target], response: dict[str, Any]) -> list[RunCase]:
    index = _first_live(targets)
    if index is None:
        return []
    target = targets[index]
    out = []
    ignored = _ignored_param(target.config)
    if ignored:
        sep = "&" if "?" in target.url else "?"
        url = f"{target.url}{sep}{ignored}=2"
        out.append(_case(task, "ignored_param_added", response, _golden_entries(task, _replace(targets, index, url=url))))
    if target.post_kind == "form":
        out.append(_case(task, "multipart_body", response, _golden_entries(task, targets, post_style="multipart")))
    if target.response_json is not None:
        out.append(_case(task, "base64_response_content", response, _golden_entries(task, targets, base64_content=True)))
    urls = target.config["expected"]["url"]
    if isinstance(urls, list) and len(urls) > 1:
        second = g.example_url(urls[1], g.SITE_URLS[task["sites"][0]])
        out.append(_case(task, "second_url_alternative", response,
                         _golden_entries(task, _replace(targets, index, url=second))))  # fmt: skip
    if "?" not in target.url:
        out.append(_case(task, "trailing_slash", response,
                         _golden_entries(task, _replace(targets, index, url=target.url.rstrip("/") + "/"))))  # fmt: skip
    earlier = g.target_entry(dataclasses.replace(target, status=404 if target.status != 404 else 200))
    entries = _golden_entries(task, targets)
    position = next((i for i, e in enumerate(entries) if e["request"]["url"] == target.url), len(entries))
    entries.insert(position, earlier)
    out.append(_case(task, "earlier_failed_attempt", response, entries))
    lower = _golden_entries(task, targets)
    for entry in lower:
        for header in entry["request"]["headers"]:
            header["name"] = header["name"].lower()
    out.append(_case(task, "lowercase_header_names", response, lower))
    return out


# ---------------------------------------------------------------- unreadable inputs


def broken_inputs(task: dict[str, Any], targets: list[g.Target], response: dict[str, Any]) -> list[RunCase]:
    entries = _golden_entries(task, targets)
    good = json.dumps(har.har_document(entries))
    return [
        _case(task, "har_not_json", response, None, raw_har=good[: len(good) // 2]),
        _case(task, "har_without_entries", response, None, raw_har=json.dumps(har.har_document([]))),
        _case(task, "har_without_log", response, None, raw_har=json.dumps({"entries": entries})),
        _case(task, "empty_response_file", RawText(""), entries),
        _case(task, "response_is_a_list", [response], entries),
        _case(task, "response_null", None, entries),
    ]


def golden_case(task: dict[str, Any], targets: list[g.Target], response: dict[str, Any]) -> list[RunCase]:
    return [_case(task, "golden", response, _golden_entries(task, targets))]


FEATURE_KINDS = frozenset({
    "changed_referer", "wrong_cookie", "wrong_response_content", "wrong_query_value", "wrong_post_value",
    "ignored_param_added", "second_url_alternative", "base64_response_content", "multipart_body",
})  # fmt: skip


def network_features(task: dict[str, Any], targets: list[g.Target], response: dict[str, Any]) -> list[RunCase]:
    """The mutations tied to a feature of the task's evaluators (referer, cookies, JSON content, ...)."""
    candidates = [
        *network_wrong(task, targets, response),
        *network_missing(task, targets, response),
        *network_variants(task, targets, response),
    ]
    return [case for case in candidates if case.case in FEATURE_KINDS]


GROUPS: dict[str, Callable[[dict[str, Any], list[g.Target], dict[str, Any]], list[RunCase]]] = {
    "golden": golden_case,
    "response_wrong": response_wrong,
    "response_format": response_format,
    "response_text": response_text,
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
