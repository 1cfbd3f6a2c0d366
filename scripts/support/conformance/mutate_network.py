"""Mutations of the golden trace: wrong or missing events, and harmless variants."""

from __future__ import annotations

import copy
import dataclasses
import re
from typing import Any

from scripts.support.conformance import golden as g
from scripts.support.conformance import har_entries as har
from scripts.support.conformance.mutate_common import first_live, make_case, wrong_value
from scripts.support.conformance.mutate_common import golden_entries as _golden_entries
from scripts.support.conformance.runs import RunCase

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


def network_wrong(
    task: dict[str, Any], targets: list[g.Target], response: dict[str, Any], index: int | None = None
) -> list[RunCase]:
    index = first_live(targets) if index is None else index
    if index is None:
        if not targets:
            return []
        # Only should_not_exist evaluators: doing the forbidden thing must fail.
        include = [True] * len(targets)
        return [
            make_case(
                task, "forbidden_event_present", response, _golden_entries(task, targets, include=include)
            )
        ]
    target = targets[index]
    out = []
    wrong_status = 500 if target.status != 500 else 200
    out.append(
        make_case(
            task,
            "wrong_status_code",
            response,
            _golden_entries(task, _replace(targets, index, status=wrong_status)),
        )
    )
    other = "POST" if target.method == "GET" else "GET"
    out.append(
        make_case(
            task, "other_method", response, _golden_entries(task, _replace(targets, index, method=other))
        )
    )
    post = _wrong_post(target)
    if post is not None:
        out.append(
            make_case(
                task, "wrong_post_value", response, _golden_entries(task, _replace(targets, index, post=post))
            )
        )
    if target.config["expected"].get("query_params"):
        url = target.url.replace("=", "=zz", 1)
        out.append(
            make_case(
                task, "wrong_query_value", response, _golden_entries(task, _replace(targets, index, url=url))
            )
        )
    if target.response_json is not None:
        content = {k: wrong_value(v, {}) for k, v in target.response_json.items()}
        out.append(
            make_case(
                task,
                "wrong_response_content",
                response,
                _golden_entries(task, _replace(targets, index, response_json=content)),
            )
        )
    if target.response_cookies:
        cookies = {k: "nothing relevant" for k in target.response_cookies}
        out.append(
            make_case(
                task,
                "wrong_cookie",
                response,
                _golden_entries(task, _replace(targets, index, response_cookies=cookies)),
            )
        )
    return out


def network_missing(
    task: dict[str, Any], targets: list[g.Target], response: dict[str, Any], index: int | None = None
) -> list[RunCase]:
    index = first_live(targets) if index is None else index
    if index is None:
        return []
    target = targets[index]
    include = [not t.should_not_exist for t in targets]
    include[index] = False
    out = [make_case(task, "target_missing", response, _golden_entries(task, targets, include=include))]
    if target.referer:
        moved = target.referer.rstrip("/") + "/elsewhere"
        out.append(
            make_case(
                task,
                "changed_referer",
                response,
                _golden_entries(task, _replace(targets, index, referer=moved)),
            )
        )
    later = g.target_entry(dataclasses.replace(target, status=404 if target.status != 404 else 200))
    out.append(
        make_case(
            task, "later_event_differs", response, _golden_entries(task, targets, after_each={index: [later]})
        )
    )
    base = g.SITE_URLS[task["sites"][0]]
    stray = har.navigation(f"{base}/some/other/page", referer=target.url)
    out.append(
        make_case(
            task,
            "later_navigation_elsewhere",
            response,
            _golden_entries(task, targets, after_each={index: [stray]}),
        )
    )
    sep = "&" if "?" in target.url else "?"
    out.append(
        make_case(
            task,
            "extra_query_param",
            response,
            _golden_entries(task, _replace(targets, index, url=f"{target.url}{sep}utm_source=agent")),
        )
    )
    return out


def _ignored_param(config: dict[str, Any]) -> str | None:
    names = config.get("ignored_query_params") or []
    if names:
        return names[0]
    for pattern in config.get("ignored_query_params_patterns") or []:
        for candidate in (
            "page",
            "sort",
            "isAjax",
            "_",
            "paging[current]",
            "sorting[field]",
            "serializer",
            "zzz",
        ):
            if re.search(pattern, candidate, re.IGNORECASE):
                return candidate
    return None


def network_variants(
    task: dict[str, Any], targets: list[g.Target], response: dict[str, Any], index: int | None = None
) -> list[RunCase]:
    index = first_live(targets) if index is None else index
    if index is None:
        return []
    target = targets[index]
    out = []
    ignored = _ignored_param(target.config)
    if ignored:
        sep = "&" if "?" in target.url else "?"
        url = f"{target.url}{sep}{ignored}=2"
        out.append(
            make_case(
                task,
                "ignored_param_added",
                response,
                _golden_entries(task, _replace(targets, index, url=url)),
            )
        )
    if target.post_kind == "form":
        out.append(
            make_case(
                task, "multipart_body", response, _golden_entries(task, targets, post_style="multipart")
            )
        )
    if target.response_json is not None:
        out.append(
            make_case(
                task, "base64_response_content", response, _golden_entries(task, targets, base64_content=True)
            )
        )
    urls = target.config["expected"]["url"]
    if isinstance(urls, list) and len(urls) > 1:
        second = g.example_url(urls[1], g.SITE_URLS[task["sites"][0]])
        out.append(
            make_case(
                task,
                "second_url_alternative",
                response,
                _golden_entries(task, _replace(targets, index, url=second)),
            )
        )
    if "?" not in target.url:
        out.append(
            make_case(
                task,
                "trailing_slash",
                response,
                _golden_entries(task, _replace(targets, index, url=target.url.rstrip("/") + "/")),
            )
        )
    earlier = g.target_entry(dataclasses.replace(target, status=404 if target.status != 404 else 200))
    entries = _golden_entries(task, targets)
    position = next((i for i, e in enumerate(entries) if e["request"]["url"] == target.url), len(entries))
    entries.insert(position, earlier)
    out.append(make_case(task, "earlier_failed_attempt", response, entries))
    lower = _golden_entries(task, targets)
    for entry in lower:
        for header in entry["request"]["headers"]:
            header["name"] = header["name"].lower()
    out.append(make_case(task, "lowercase_header_names", response, lower))
    return out


FEATURE_KINDS = (
    "changed_referer", "wrong_cookie", "wrong_response_content", "base64_response_content",
    "second_url_alternative", "wrong_query_value", "ignored_param_added", "wrong_post_value",
    "multipart_body",
)  # fmt: skip
"""Mutations tied to one feature of an evaluator, rarest first."""


def network_features(
    task: dict[str, Any], targets: list[g.Target], response: dict[str, Any]
) -> list[RunCase]:
    """The mutations tied to a feature of the task's evaluators (referer, cookies, JSON content, ...)."""
    candidates = []
    for index, target in enumerate(targets):
        if target.should_not_exist:
            continue
        for make in (network_wrong, network_missing, network_variants):
            candidates += [c for c in make(task, targets, response, index) if c.case in FEATURE_KINDS]
    # Rarer kinds first, and only the two rarest rotate, so referers, cookies and JSON content get exercised.
    return sorted(candidates, key=lambda c: FEATURE_KINDS.index(c.case))[:2]
