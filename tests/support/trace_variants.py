"""Malformed-trace variants: golden traces of official tasks, bent the ways real files are bent.

Used by test_trace_leniency_parity.py. Each variant changes one thing about
the HAR (a field missing, of another type, spelled another way) in one of
three places: every entry, only the expected entry, or every entry but it.
Whether the reference errors depends on where: it reads a field only when
one of its evaluators needs it from that event.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable
from copy import deepcopy
from pathlib import Path
from typing import Any

from tests.support import network_cases as cases
from webarena_live.evaluator.tasks import Task

Change = Callable[[dict[str, Any]], None]

TASKS = {
    0: "retrieve (no network evaluator)",
    44: "navigate, GET",
    102: "navigate, POST with a referer header",
    267: "retrieve, GET with a Cookie header",
    389: "mutate, JSON post data",
    511: "mutate, form post data and response cookies",
    523: "mutate, response content",
}


def _request(change: Callable[[dict[str, Any]], None]) -> Change:
    return lambda entry: change(entry["request"])


def _response(change: Callable[[dict[str, Any]], None]) -> Change:
    return lambda entry: change(entry["response"])


def _drop(key: str) -> Callable[[dict[str, Any]], None]:
    return lambda part: part.pop(key, None)


def _set(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda part: part.__setitem__(key, deepcopy(value))


def _headers_as_object(part: dict[str, Any]) -> None:
    part["headers"] = {item["name"]: item["value"] for item in part.get("headers", [])}


def _header_values(change: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    def apply(part: dict[str, Any]) -> None:
        for item in part.get("headers", []):
            change(item)

    return apply


def _cookies_as_object(part: dict[str, Any]) -> None:
    part["cookies"] = {item["name"]: item["value"] for item in part.get("cookies", [])}


def _post(change: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    def apply(request: dict[str, Any]) -> None:
        if isinstance(request.get("postData"), dict):
            change(request["postData"])

    return apply


def _content(change: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    def apply(response: dict[str, Any]) -> None:
        if isinstance(response.get("content"), dict):
            change(response["content"])

    return apply


def _method_lower(request: dict[str, Any]) -> None:
    request["method"] = request["method"].lower()


def _status_text(response: dict[str, Any]) -> None:
    response["status"] = str(response["status"])


def _status_float(response: dict[str, Any]) -> None:
    response["status"] = float(response["status"])


def _extra_fields(entry: dict[str, Any]) -> None:
    entry["_resourceType"] = "document"
    entry["request"]["_extra"] = {"any": ["thing"]}
    entry["response"]["_transferSize"] = 123
    entry["response"]["content"]["compression"] = 0


def _url_port(request: dict[str, Any]) -> None:
    request["url"] = request["url"].replace("127.0.0.1:", "127.0.0.1:x", 1)


ENTRY_VARIANTS: dict[str, Change] = {
    "request.headers {}": _request(_set("headers", {})),
    "request.headers as object": _request(_headers_as_object),
    "request.headers missing": _request(_drop("headers")),
    "request.headers null": _request(_set("headers", None)),
    "request header without value": _request(_header_values(_drop("value"))),
    "request header value a number": _request(_header_values(_set("value", 1))),
    "response.headers as object": _response(_headers_as_object),
    "response.headers missing": _response(_drop("headers")),
    "response.status missing": _response(_drop("status")),
    "response.status text '200'": _response(_status_text),
    "response.status 'OK'": _response(_set("status", "OK")),
    "response.status null": _response(_set("status", None)),
    "response.status float": _response(_status_float),
    "response.status true": _response(_set("status", True)),
    "response.status ' 200.0 '": _response(lambda r: r.__setitem__("status", f" {r['status']}.0 ")),
    "response.status 200.5": _response(_set("status", 200.5)),
    "request.headers a string": _request(_set("headers", "Accept: */*")),
    "postData.text a number": _request(_post(_set("text", 5))),
    "response.content.mimeType null": _response(_content(_set("mimeType", None))),
    "response missing": lambda entry: entry.pop("response"),
    "request.method lower case": _request(_method_lower),
    "request.method missing": _request(_drop("method")),
    "request.method null": _request(_set("method", None)),
    "request.url missing": _request(_drop("url")),
    "request.url unparsable": _request(_set("url", "http://[::1/x")),
    "request.url bad port": _request(_url_port),
    "request.url empty": _request(_set("url", "")),
    "request.url about:blank": _request(_set("url", "about:blank")),
    "request.url a number": _request(_set("url", 7)),
    "request missing": lambda entry: entry.pop("request"),
    "postData without mimeType": _request(_post(_drop("mimeType"))),
    "postData without text": _request(_post(_drop("text"))),
    "postData a string": _request(lambda r: r.__setitem__("postData", "a=1") if "postData" in r else None),
    "postData.params only": _request(_post(lambda p: p.update(params=[], text=""))),
    "queryString missing": _request(_drop("queryString")),
    "queryString as object": _request(_set("queryString", {"a": "1"})),
    "request.cookies as object": _request(_set("cookies", {"a": "1"})),
    "response.cookies as object": _response(_cookies_as_object),
    "response.cookies missing": _response(_drop("cookies")),
    "response.cookies null": _response(_set("cookies", None)),
    "response.cookie without value": _response(lambda r: [c.pop("value") for c in r["cookies"]]),
    "response.content missing": _response(_drop("content")),
    "response.content without text": _response(_content(_drop("text"))),
    "response.content without mimeType": _response(_content(_drop("mimeType"))),
    "response.content a string": _response(_set("content", "{}")),
    "response.redirectURL missing": _response(_drop("redirectURL")),
    "httpVersion and statusText missing": lambda e: (
        e["request"].pop("httpVersion"),
        e["response"].pop("statusText"),
    ),
    "startedDateTime and time missing": lambda e: (e.pop("startedDateTime"), e.pop("time")),
    "time a string": _set("time", "fast"),
    "extra fields": _extra_fields,
}

PLACES = ("every entry", "expected entry", "other entries")


def variant_entries(task: Task, change: Change, place: str) -> list[dict[str, Any]]:
    entries = cases.golden(task)
    expected = len(entries) - 2  # the golden builder ends with the expected entry and a favicon
    for index, entry in enumerate(entries):
        touched = place == "every entry" or (index == expected) == (place == "expected entry")
        if touched:
            change(entry)
    return entries


DOCUMENT_VARIANTS: dict[str, Callable[[list[dict[str, Any]]], Any]] = {
    "log missing": lambda entries: {"entries": entries},
    "log.entries missing": lambda entries: {"log": {"version": "1.2"}},
    "log.entries empty": lambda entries: {"log": {"entries": []}},
    "log.entries an object": lambda entries: {"log": {"entries": {"0": entries[0]}}},
    "log without version/creator/pages": lambda entries: {"log": {"entries": entries}},
    "a bare list of entries": lambda entries: entries,
    "an entry that is a string": lambda entries: {"log": {"entries": [*entries, "junk"]}},
    "an entry that is a list": lambda entries: {"log": {"entries": [[], *entries]}},
    "an entry that is a number": lambda entries: {"log": {"entries": [*entries, 7]}},
}


def write_har(path: Path, document: Any) -> Path:
    path.write_text(json.dumps(document, indent=1))
    return path


def write_playwright_zip(path: Path, entries: list[dict[str, Any]]) -> Path:
    lines = [json.dumps({"type": "resource-snapshot", "snapshot": entry}) for entry in entries]
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("trace.trace", "")
        archive.writestr("trace.network", "\n".join(lines) + "\n")
    return path
