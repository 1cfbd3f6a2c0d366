"""Builds HAR traces for official tasks' network evaluators: a golden trace and mutations.

Used by test_network_parity.py. The traces are realistic enough for the
expected event to be found (noise of static assets, XHRs and earlier
navigations around it); where an expectation is a pattern the builder
guesses a concrete value, and the verdict is whatever the oracle says —
the tests compare verdicts, not the builder's cleverness.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable
from copy import deepcopy
from typing import Any
from urllib.parse import quote, urlencode

from webarena_live.evaluator.sites import SiteMap
from webarena_live.evaluator.tasks import NetworkEventEvaluatorConfig, Task, TaskType

CONFIG = {
    "environments": {
        "__SHOPPING__": {"urls": ["http://127.0.0.1:7770"]},
        "__SHOPPING_ADMIN__": {"urls": ["http://127.0.0.1:7780/admin"]},
        "__GITLAB__": {"urls": ["http://127.0.0.1:8023"]},
        "__REDDIT__": {"urls": ["http://127.0.0.1:9999"]},
        "__MAP__": {"urls": ["http://127.0.0.1:3000"]},
        "__WIKIPEDIA__": {"urls": ["http://127.0.0.1:8888"]},
        "__HOMEPAGE__": {"urls": ["http://127.0.0.1:4399"]},
    }
}
SITE_MAP = SiteMap.from_dict(CONFIG)

NAV_HEADERS = [
    ("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"),
    ("Sec-Fetch-Dest", "document"),
    ("Sec-Fetch-Mode", "navigate"),
    ("Sec-Fetch-User", "?1"),
]
XHR_HEADERS = [("Accept", "application/json"), ("Sec-Fetch-Dest", "empty"), ("Sec-Fetch-Mode", "cors")]


def concrete(pattern: str) -> str:
    """A string that a simple `^...$` pattern of the dataset plausibly matches."""
    body = pattern[1:-1] if pattern.startswith("^") and pattern.endswith("$") else pattern
    body = re.sub(r"\(\?[=!].*?\)", "", body)
    body = re.sub(r"\(([^()|]*)\|[^()]*\)", r"\1", body)
    body = body.replace(".*", "").replace(".+", "x").replace(r"\d+", "1").replace(r"[0-9]+", "1")
    body = body.replace("?", "")
    return re.sub(r"\\(.)", r"\1", body)


def first(value: Any) -> Any:
    return value[0] if isinstance(value, list) and value else value


def render(template: str, task: Task) -> str:
    text = concrete(template) if template.startswith("^") else template
    if text.startswith("__"):
        return SITE_MAP.render(text, sites=task.sites, strict=False)
    if text.startswith("/"):
        return SITE_MAP.render(f"__{task.sites[0].upper()}__{text}", sites=task.sites, strict=False)
    return text


def _nest(path: str, value: Any, into: dict[str, Any]) -> None:
    keys = [k for k in re.split(r"\.|\[(\d+)\]", path[2:]) if k]
    node: Any = into
    for index, key in enumerate(keys):
        last = index == len(keys) - 1
        if key.isdigit():
            continue
        following_is_index = not last and keys[index + 1].isdigit()
        if last:
            node[key] = value
        elif following_is_index:
            node = node.setdefault(key, [{}])[0]
        else:
            node = node.setdefault(key, {})


def body_for(data: dict[str, Any], *, as_json: bool) -> tuple[str, str]:
    """Post data / response content satisfying the expected keys, as form or JSON."""
    plain: dict[str, Any] = {}
    nested = (
        as_json
        or any(key.startswith("$.") and not key.startswith("$.^") for key in data)
        or any(not isinstance(first(value), str) for value in data.values())
    )
    for key, value in data.items():
        value = first(value)
        if isinstance(value, str) and value.startswith("^") and value.endswith("$"):
            value = concrete(value)
        if key.startswith("$.^") or key.startswith("^"):
            plain[concrete(key[2:] if key.startswith("$.") else key)] = value
        elif key.startswith("$."):
            _nest(key, value, plain)
        else:
            plain[key] = value
    if nested:
        return json.dumps(plain), "application/json"
    return urlencode({k: v if isinstance(v, str) else json.dumps(v) for k, v in plain.items()}), (
        "application/x-www-form-urlencoded; charset=UTF-8"
    )


def entry(
    method: str,
    url: str,
    *,
    status: int = 200,
    headers: list[tuple[str, str]] | None = None,
    post: tuple[str, str] | None = None,
    content: tuple[str, str] | None = None,
    cookies: list[tuple[str, str]] | None = None,
    redirect: str = "",
) -> dict[str, Any]:
    request: dict[str, Any] = {
        "method": method,
        "url": url,
        "httpVersion": "HTTP/1.1",
        "headers": [{"name": n, "value": v} for n, v in headers or []],
        "queryString": [],
        "cookies": [],
        "headersSize": -1,
        "bodySize": 0,
    }
    if post:
        request["postData"] = {"text": post[0], "mimeType": post[1]}
    response: dict[str, Any] = {
        "status": status,
        "statusText": "",
        "httpVersion": "HTTP/1.1",
        "headers": [],
        "cookies": [{"name": n, "value": v} for n, v in cookies or []],
        "content": {
            "size": 0,
            "mimeType": content[1] if content else "text/html",
            **({"text": content[0]} if content else {}),
        },
        "redirectURL": redirect,
        "headersSize": -1,
        "bodySize": 0,
    }
    return {
        "startedDateTime": "2025-01-01T00:00:00.000Z",
        "time": 1,
        "request": request,
        "response": response,
        "cache": {},
        "timings": {},
    }


def expected_entry(config: NetworkEventEvaluatorConfig, task: Task) -> dict[str, Any]:
    spec = config.expected
    url = render(first(spec.url), task)
    if spec.query_params:
        pairs = []
        for name, values in spec.query_params.items():
            value = first(values) if isinstance(values, list) else values
            if isinstance(value, str) and value.startswith("^"):
                value = concrete(value)
            pairs.append(f"{quote(name)}={quote(str(value))}")
        url = url.split("?")[0] + "?" + "&".join(pairs)
    navigation = spec.http_method == "GET" and (task.task_type == TaskType.NAVIGATE or not spec.post_data)
    headers = list(NAV_HEADERS if navigation else XHR_HEADERS)
    for name, value in (spec.headers or {}).items():
        value = first(value)
        if name.lower() == "referer":
            value = render(value, task)
        elif isinstance(value, str) and value.startswith("^"):
            value = concrete(value)
        headers.append((name, value))
    post = body_for(spec.post_data, as_json=False) if spec.post_data else None
    content = body_for(spec.response_content, as_json=True) if spec.response_content else None
    cookies = [
        (name, quote(concrete(first(v)) if str(first(v)).startswith("^") else str(first(v))))
        for name, v in (spec.response_cookies or {}).items()
    ]
    status = spec.response_status if spec.response_status > 0 else 200
    redirect = (
        SITE_MAP.render(f"__{task.sites[0].upper()}__/done", sites=task.sites) if 300 <= status < 400 else ""
    )
    return entry(
        spec.http_method,
        url,
        status=status,
        headers=headers,
        post=post,
        content=content,
        cookies=cookies,
        redirect=redirect,
    )


def noise(task: Task) -> list[dict[str, Any]]:
    base = SITE_MAP.render(f"__{task.sites[0].upper()}__", sites=task.sites)
    return [
        entry("GET", f"{base}/", headers=NAV_HEADERS),
        entry("GET", f"{base}/static/app.js", headers=[("Accept", "*/*")]),
        entry("GET", f"{base}/static/logo.png", headers=[("Accept", "image/*")]),
        entry(
            "GET", f"{base}/api/ping?x=1", headers=XHR_HEADERS, content=('{"ok": true}', "application/json")
        ),
    ]


def decoys(task: Task) -> list[dict[str, Any]]:
    """Events resembling the first expected one: same method, same last path segment.

    Some cannot match (another parent path), some normalize to the expected
    URL (an escaped letter, a dot segment) and do match: they exercise the
    evaluator's cheap path pre-check against the oracle's full URL reading.
    """
    configs = [c for c in task.network_configs if not c.should_not_exist]
    if not configs:
        return []
    original = expected_entry(configs[0], task)
    scheme, rest = original["request"]["url"].split("://", 1)
    host, _, tail = rest.partition("/")
    path, _, query = tail.partition("?")
    query = f"?{query}" if query else ""
    parent, _, last = path.rstrip("/").rpartition("/")
    variants = [f"decoy/{path}", f"{parent}/x/../{last}" if parent else f"x/../{last}"]
    letter = next((i for i, ch in enumerate(last) if ch.isalpha()), None)
    if letter is not None:
        variants.append(f"{parent}/{last[:letter]}%{ord(last[letter]):02X}{last[letter + 1 :]}")
    made = []
    for variant in variants:
        decoy = deepcopy(original)
        decoy["request"]["url"] = f"{scheme}://{host}/{variant.lstrip('/')}{query}"
        made.append(decoy)
    return made


def golden(task: Task) -> list[dict[str, Any]]:
    entries = noise(task) + decoys(task)
    for config in task.network_configs:
        if not config.should_not_exist:
            entries.append(expected_entry(config, task))
    entries.append(
        entry("GET", entries[0]["request"]["url"] + "favicon.ico", headers=[("Accept", "image/*")])
    )
    return entries


def _last_expected(entries: list[dict[str, Any]]) -> dict[str, Any]:
    return entries[-2]


def _mutate(change: Callable[[dict[str, Any]], None]) -> Callable[[Task], list[dict[str, Any]] | None]:
    def build(task: Task) -> list[dict[str, Any]] | None:
        entries = golden(task)
        if len(entries) <= len(noise(task)) + len(decoys(task)) + 1:
            return None
        change(_last_expected(entries))
        return entries

    return build


def _set_status(e: dict[str, Any]) -> None:
    e["response"]["status"] = 500 if e["response"]["status"] != 500 else 200


def _set_method(e: dict[str, Any]) -> None:
    e["request"]["method"] = "GET" if e["request"]["method"] != "GET" else "POST"


def _change_referer(e: dict[str, Any]) -> None:
    e["request"]["headers"] = [h for h in e["request"]["headers"] if h["name"].lower() != "referer"] + [
        {"name": "Referer", "value": "http://127.0.0.1:8023/somewhere/else"}
    ]


def _extra_query(e: dict[str, Any]) -> None:
    url = e["request"]["url"]
    e["request"]["url"] = url + ("&" if "?" in url else "?") + "isAjax=true&page=2&extra_param=1"


def _change_post(e: dict[str, Any]) -> None:
    post = e["request"].get("postData")
    if post:
        post["text"] = post["text"].replace("a", "b").replace("1", "2")


def _change_path(e: dict[str, Any]) -> None:
    e["request"]["url"] = e["request"]["url"].replace("127.0.0.1:", "127.0.0.1:").split("?")[0] + "/other"


def _upper_case(e: dict[str, Any]) -> None:
    url = e["request"]["url"]
    scheme, rest = url.split("://", 1)
    host, _, tail = rest.partition("/")
    e["request"]["url"] = f"{scheme}://{host}/{tail.upper()}"


def _drop_expected(task: Task) -> list[dict[str, Any]] | None:
    entries = golden(task)
    return entries[: len(noise(task)) + len(decoys(task))] + entries[-1:]


def _json_post_as_form(e: dict[str, Any]) -> None:
    post = e["request"].get("postData")
    if post and "json" in post["mimeType"]:
        post["mimeType"] = "text/plain"


def _base64_query(e: dict[str, Any]) -> None:
    url = e["request"]["url"]
    if "?" in url:
        path, query = url.split("?", 1)
        encoded = base64.urlsafe_b64encode(query.encode()).decode().rstrip("=")
        e["request"]["url"] = f"{path.rstrip('/')}/{encoded}/"


def _post_case(e: dict[str, Any]) -> None:
    post = e["request"].get("postData")
    if post:
        post["text"] = post["text"].upper()


def _shadowed(task: Task) -> list[dict[str, Any]] | None:
    entries = golden(task)
    if len(entries) <= len(noise(task)) + len(decoys(task)) + 1:
        return None
    shadow = deepcopy(_last_expected(entries))
    _change_post(shadow)
    shadow["response"]["status"] = 404
    entries.insert(len(entries) - 1, shadow)
    return entries


def _referer_case(e: dict[str, Any]) -> None:
    for header in e["request"]["headers"]:
        if header["name"].lower() == "referer":
            scheme, rest = header["value"].split("://", 1)
            host, _, tail = rest.partition("/")
            header["value"] = f"{scheme}://{host}/{tail.swapcase()}"


MUTATIONS: dict[str, Callable[[Task], list[dict[str, Any]] | None]] = {
    "golden": golden,
    "status": _mutate(_set_status),
    "method": _mutate(_set_method),
    "referer": _mutate(_change_referer),
    "extra_query": _mutate(_extra_query),
    "post_data": _mutate(_change_post),
    "path": _mutate(_change_path),
    "upper_case": _mutate(_upper_case),
    "missing": _drop_expected,
    "post_mime": _mutate(_json_post_as_form),
    "base64_query": _mutate(_base64_query),
    "post_case": _mutate(_post_case),
    "shadowed": _shadowed,
    "referer_case": _mutate(_referer_case),
}


def har(entries: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "log": {"version": "1.2", "creator": {"name": "tests", "version": "1"}, "entries": deepcopy(entries)}
    }
