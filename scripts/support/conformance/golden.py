"""The golden run of an official task: its expected answer and a trace that satisfies it.

Works on the dataset's raw JSON (not on our task models) so the generator does
not share assumptions with the code under test. Each network evaluator becomes
a `Target`: the one event that satisfies it, described by fields that the
mutations can change before the trace is laid out by `build_entries`.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from jsonpath_ng import parse as parse_jsonpath

from scripts.support.conformance import har_entries as har
from scripts.support.conformance.regex_example import example_for, regex_example

SITE_URLS = {
    "shopping": "http://shop.test:7770",
    "shopping_admin": "http://shop.test:7780/admin",
    "reddit": "http://forum.test:9999",
    "gitlab": "http://gitlab.test:8023",
    "wikipedia": "http://wiki.test:8888",
    "map": "http://map.test:3000",
    "homepage": "http://home.test:4399",
}
"""Where each site "lives" in generated traces; nothing is ever fetched."""


def site_config() -> dict[str, Any]:
    """The site map in the reference's config format."""
    return {"environments": {f"__{site.upper()}__": {"urls": [url]} for site, url in SITE_URLS.items()}}


def render(template: str) -> str:
    for site, url in SITE_URLS.items():
        template = template.replace(f"__{site.upper()}__", url)
    return template


def is_regexp(value: Any) -> bool:
    return isinstance(value, str) and len(value) >= 2 and value.startswith("^") and value.endswith("$")


def quote_url(url: str) -> str:
    """Percent-encode what a browser would (spaces, quotes), keeping URL syntax."""
    return quote(url, safe=":/?#[]@!$&'()*+,;=%~")


def example_url(template: str, base: str) -> str:
    """A concrete, rendered URL for a URL template or `^...$` pattern."""
    if not is_regexp(template):
        return quote_url(render(template))
    example = regex_example(template)
    if not example.startswith("__"):
        # Patterns such as "^.*/route/...$" leave the site open: put the event on the task's first site.
        example = base + (example[1:] if example.startswith("x/") else example)
    return quote_url(render(example))


def first_alternative(value: Any, schema: dict[str, Any] | None) -> Any:
    """The expected value with every "any of these" list replaced by its first choice."""
    schema = schema or {}
    kind = schema.get("type")
    if kind == "array" and isinstance(value, list):
        return [first_alternative(item, schema.get("items")) for item in value]
    if kind == "object" and isinstance(value, dict):
        props = schema.get("properties", {})
        return {k: first_alternative(v, props.get(k)) for k, v in value.items()}
    if isinstance(value, list) and value:
        return first_alternative(value[0], schema)
    return value


def golden_response(task: dict[str, Any]) -> dict[str, Any]:
    config = next(e for e in task["eval"] if e["evaluator"] == "AgentResponseEvaluator")
    expected = config["expected"]
    data = expected.get("retrieved_data")
    if data is not None:
        data = _concrete(first_alternative(data, config.get("results_schema") or {"type": "array"}))
    return {"task_type": expected["task_type"], "status": expected["status"], "retrieved_data": data}


@dataclasses.dataclass(frozen=True)
class Target:
    """The event that satisfies one NetworkEventEvaluator."""

    config: dict[str, Any]
    method: str
    url: str
    status: int
    referer: str | None
    headers: dict[str, str]
    post_kind: str | None  # "form", "json" or None
    post: dict[str, Any] | None
    response_json: Any
    response_cookies: dict[str, str] | None
    should_not_exist: bool
    as_xhr: bool

    @property
    def path(self) -> str:
        return urlsplit(self.url).path


def _json_key_example(key: str) -> str:
    pattern = key[2:] if key.startswith("$.^") else key
    return regex_example(pattern)


def _filter_path_list(key: str, values: list[Any]) -> tuple[str, Any] | None:
    """`$['field'][?(@.flag == 1)].attr` with a list: the field holds matching objects (as JSON text)."""
    import re

    found = re.fullmatch(r"\$\['([^']+)'\]\[\?\(@\.(\w+) == (\d+)\)\]\.(\w+)", key)
    if not found:
        return None
    field, flag, flag_value, attr = found.groups()
    items = [{flag: int(flag_value), attr: value} for value in values]
    return field, json.dumps(items)


def nested_document(expected: dict[str, Any]) -> dict[str, Any]:
    """A JSON document in which every (JSONPath) key of `expected` finds its value."""
    doc: dict[str, Any] = {}
    for key, value in expected.items():
        if value is None:
            continue
        if key.startswith("$.^") or is_regexp(key):
            doc[_json_key_example(key)] = value
        elif key.startswith("$"):
            special = _filter_path_list(key, value if isinstance(value, list) else [value])
            if special is not None:
                doc[special[0]] = special[1]
            else:
                parse_jsonpath(key).update_or_create(doc, value)
        else:
            doc[key] = value
    return doc


def _concrete(value: Any) -> Any:
    """Regex values become examples, recursively."""
    if isinstance(value, str):
        return example_for(value, flags=0) if is_regexp(value) else value
    if isinstance(value, list):
        return [_concrete(v) for v in value]
    if isinstance(value, dict):
        return {k: _concrete(v) for k, v in value.items()}
    return value


def form_text(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def _post_payload(config: dict[str, Any]) -> tuple[str | None, dict[str, Any] | None]:
    expected = config["expected"].get("post_data")
    if not expected:
        return None, None
    props = (config.get("post_data_schema") or {}).get("properties", {})
    values = {k: _concrete(first_alternative(v, props.get(k))) for k, v in expected.items()}
    needs_json = any(k.startswith("$") or is_regexp(k) for k in values) or any(
        isinstance(v, list | dict) for v in values.values()
    )
    if needs_json:
        return "json", nested_document(values)
    # Real forms always carry more than the checked fields (Magento's form_key, Rails' token).
    return "form", {"form_key": "Xk2Lm9Qw", **{k: form_text(v) for k, v in values.items() if v is not None}}


def _query_string(config: dict[str, Any]) -> list[tuple[str, str]]:
    pairs = []
    for key, values in (config["expected"].get("query_params") or {}).items():
        for value in values if isinstance(values, list) else [values]:
            pairs.append((key, _concrete(value) if value is not None else ""))
    return pairs


def make_target(task: dict[str, Any], config: dict[str, Any]) -> Target:
    expected = config["expected"]
    base = SITE_URLS[task["sites"][0]]
    url_template = expected["url"][0] if isinstance(expected["url"], list) else expected["url"]
    url = example_url(url_template, base)
    query = _query_string(config)
    if query:
        url += ("&" if "?" in url else "?") + urlencode(query)
    method = (expected.get("http_method") or "GET").upper()
    headers = dict(expected.get("headers") or {})
    referer = None
    for name in list(headers):
        if name.lower() == "referer":
            referer = example_url(first_alternative(headers.pop(name), None), base)
    headers = {name: example_for(first_alternative(value, None)) for name, value in headers.items()}
    post_kind, post = _post_payload(config)
    content = expected.get("response_content")
    cookies = expected.get("response_cookies")
    path = urlsplit(url).path
    as_xhr = (
        post_kind == "json"
        or content is not None
        or "/api/" in path
        or path.endswith(".json")
        or "/mui/index/render" in path
        or method in ("PUT", "PATCH", "DELETE")
    )
    return Target(
        config=config,
        method=method,
        url=url,
        status=int(expected.get("response_status") or 200),
        referer=referer,
        headers=headers,
        post_kind=post_kind,
        post=post,
        response_json=nested_document(_concrete(content)) if content else None,
        response_cookies={k: example_for(v) for k, v in cookies.items()} if cookies else None,
        should_not_exist=bool(config.get("should_not_exist")),
        as_xhr=as_xhr and not (_is_navigate(task) and method == "GET"),
    )


def _is_navigate(task: dict[str, Any]) -> bool:
    config = next(e for e in task["eval"] if e["evaluator"] == "AgentResponseEvaluator")
    return str(config["expected"]["task_type"]).lower() == "navigate"


def targets_for(task: dict[str, Any]) -> list[Target]:
    return [make_target(task, c) for c in task["eval"] if c["evaluator"] == "NetworkEventEvaluator"]


def post_data_object(target: Target, *, style: str | None = None) -> dict[str, Any] | None:
    if target.post is None:
        return None
    kind = style or target.post_kind
    if kind == "json":
        return har.json_body(target.post)
    if kind == "multipart":
        return har.multipart_body({k: form_text(v) for k, v in target.post.items()})
    return har.form_body({k: form_text(v) for k, v in target.post.items()})


def target_entry(
    target: Target, *, post_style: str | None = None, base64_content: bool = False
) -> dict[str, Any]:
    """The HAR entry of one target event."""
    cookies = (
        [{"name": k, "value": quote(v), "path": "/", "httpOnly": False, "secure": False}
         for k, v in target.response_cookies.items()]
        if target.response_cookies
        else None
    )  # fmt: skip
    redirect = ""
    if 300 <= target.status < 400:
        redirect = target.referer or target.url.split("?")[0]
    if target.as_xhr or target.response_json is not None:
        return har.xhr(
            target.method,
            target.url,
            referer=target.referer,
            status=target.status,
            post_data=post_data_object(target, style=post_style),
            response_json=target.response_json,
            response_base64=base64_content,
            response_cookies=cookies,
            extra_headers=target.headers,
        )
    if target.method == "GET":
        entry = har.navigation(
            target.url, referer=target.referer, status=target.status, redirect_url=redirect
        )
        if target.headers:
            entry["request"]["headers"].extend({"name": k, "value": v} for k, v in target.headers.items())
        return entry
    return har.form_submit(
        target.method,
        target.url,
        post_data_object(target, style=post_style),
        referer=target.referer,
        status=target.status,
        redirect_url=redirect,
        response_cookies=cookies,
        extra_headers=target.headers,
    )


def build_entries(
    task: dict[str, Any],
    targets: list[Target],
    *,
    include: list[bool] | None = None,
    post_style: str | None = None,
    base64_content: bool = False,
    after_each: dict[int, list[dict[str, Any]]] | None = None,
) -> list[dict[str, Any]]:
    """Lay out a realistic trace: start page, noise, each target in order, trailing noise.

    `include[i]` False leaves target i out (should_not_exist targets are left
    out unless forced in by `include`). `after_each[i]` are extra entries placed
    right after target i. Navigate-task document targets go last so they are the
    final navigation.
    """
    base = SITE_URLS[task["sites"][0]]
    start = quote_url(render(task["start_urls"][0])) if task.get("start_urls") else base + "/"
    entries = [
        har.navigation(start),
        har.asset(f"{base}/static/version1700000000/frontend/bundle.js", referer=start),
        har.asset(f"{base}/static/version1700000000/frontend/styles.css", referer=start),
        har.asset(f"{base}/static/version1700000000/frontend/logo.png", referer=start),
        har.xhr("GET", f"{base}/__conformance_noise__/section/load?sections=messages", referer=start),
    ]
    navigate = _is_navigate(task)
    order = list(range(len(targets)))
    order.sort(key=lambda i: navigate and targets[i].method == "GET")
    previous = start
    for i in order:
        target = targets[i]
        wanted = include[i] if include is not None else not target.should_not_exist
        if wanted:
            if target.referer and target.referer != previous:
                entries.append(har.navigation(target.referer, referer=previous))
            entries.append(target_entry(target, post_style=post_style, base64_content=base64_content))
            entries.append(
                har.asset(f"{base}/static/version1700000000/frontend/widget.js", referer=target.url)
            )
            if 300 <= target.status < 400 and not target.as_xhr and target.method != "GET" and not navigate:
                location = entries[-2]["response"]["redirectURL"]
                entries.append(har.navigation(location, referer=target.referer or previous))
            previous = target.url if not target.as_xhr else previous
        entries.extend((after_each or {}).get(i, []))
    entries.append(har.xhr("GET", f"{base}/__conformance_noise__/customer/data.json", referer=previous))
    entries.append(har.asset(f"{base}/static/version1700000000/frontend/font.woff2", referer=previous))
    return entries
