"""The expected side of one NetworkEventEvaluator, prepared once, and how it reads events.

A `Plan` is built per (evaluator config, task sites, site map): the expected
event normalized strictly, the candidate filter (method, base URL, referer) and
the lenient normalization of candidate events, each memoized on the event under
the plan's token so a growing trace is never read twice.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any
from urllib.parse import unquote, urlsplit

from webarena_live.evaluator import bodies, jsonpaths, trace_defects, values
from webarena_live.evaluator.sites import SiteMap
from webarena_live.evaluator.tasks import NetworkEventEvaluatorConfig, Task, TaskType
from webarena_live.evaluator.trace import NetworkEvent
from webarena_live.evaluator.values.url import Url

URL_HEADERS = ("redirect_url", "referer")
"""Expected header names whose values are compared as URLs (names as written in the task)."""

_tokens = itertools.count()


class Plan:
    """The expected side of one evaluator config for one task and site map, prepared once."""

    def __init__(self, config: NetworkEventEvaluatorConfig, task: Task, site_map: SiteMap) -> None:
        self.token = next(_tokens)
        self.candidate_key = ("network.candidate", self.token)
        self.url_key = ("network.url", self.token)
        self.normalized_key = ("network.normalized", self.token)
        self.config = config
        spec = config.expected
        sites = task.sites
        self.navigate_only = task.task_type == TaskType.NAVIGATE and spec.http_method == "GET"
        # Events' methods are upper case already; the reference compares both sides lower-cased.
        self.method = spec.http_method.upper() if spec.http_method else ""
        self.derender_lenient = partial(site_map.derender, sites=sites, strict=False)
        self.derender_strict = partial(site_map.derender, sites=sites, strict=True)
        self._render = {
            strict: partial(site_map.render, sites=sites, strict=strict) for strict in (True, False)
        }
        self._ignored_post = tuple(config.ignored_post_data_params_patterns or ())
        schema = config.query_params_schema
        self._query_schema = schema

        # Step 2: the expected event, normalized strictly (errors propagate to the caller).
        expected: dict[str, Any] = spec.model_dump(mode="json", exclude_none=True)
        self.expected_url: Url = self.url(
            expected["url"], strict=True, query_params=expected.get("query_params")
        )
        self.expected_referer: Url | None = None
        if spec.headers and "referer" in spec.headers:
            self.expected_referer = self.url(spec.headers["referer"], strict=True)
        self.expected = self._normalize_event(expected, strict=True, post_keys=None, content_keys=None)
        self.post_keys = _stripped_keys(self.expected.get("post_data"))
        self.content_keys = _stripped_keys(self.expected.get("response_content"))
        self.header_names = {name: name.lower() for name in spec.headers or {}}
        self.cookie_names = tuple(spec.response_cookies or ())
        self.wants_post_data = bool(spec.post_data)
        self.wants_content = bool(spec.response_content)
        self.last_segments = _last_segments(self.expected_url, config)
        self.expected_report = values.report(self.expected)
        self.report_key = ("network.report", self.token)

    # ------------------------------------------------------------- normalizing

    def url(self, value: Any, *, strict: bool, query_params: Any = None) -> Any:
        """A URL with this config's options; lenient failures give back the raw value."""
        config = self.config
        normalize_query = None
        if self._query_schema:
            normalize_query = partial(values.normalize, schema=self._query_schema, strict=strict)
        try:
            return Url(
                value,
                render_url=self._render[strict],
                derender_url=self.derender_strict if strict else self.derender_lenient,
                query_params=query_params,
                decode_base64_query=config.decode_base64_query,
                ignored_query_params=config.ignored_query_params,
                ignored_query_params_patterns=config.ignored_query_params_patterns,
                normalize_query_params=normalize_query,
            )
        except Exception:
            if strict:
                raise
            return value

    def _normalize_event(
        self,
        event: dict[str, Any],
        *,
        strict: bool,
        post_keys: tuple[str, ...] | None,
        content_keys: tuple[str, ...] | None,
    ) -> dict[str, Any]:
        out = dict(event)
        out["url"] = self.url(event["url"], strict=strict, query_params=event.get("query_params"))
        out.pop("query_params", None)
        if event.get("headers") is not None:
            out["headers"] = {
                name: self._header(name, value, strict) for name, value in event["headers"].items()
            }
        out["post_data"] = self._post_data(event.get("post_data"), strict=strict, keys=post_keys)
        content = event.get("response_content")
        out["response_content"] = _pick(content, content_keys, strict=strict) if content else None
        cookies = event.get("response_cookies")
        out["response_cookies"] = (
            {name: values.normalize_single(value, "string", strict=strict) for name, value in cookies.items()}
            if cookies
            else None
        )
        return out

    def _header(self, name: str, value: Any, strict: bool) -> Any:
        if name in URL_HEADERS and value:
            return self.url(value, strict=strict)
        try:
            derendered = (
                self.derender_lenient(value)
                if isinstance(value, str)
                else [self.derender_lenient(item) for item in value]
            )
            return values.normalize_single(derendered, "string", strict=strict)
        except Exception:  # the reference keeps a header it cannot read as it is, even when strict
            return value

    def _post_data(
        self, data: Mapping[str, Any] | None, *, strict: bool, keys: tuple[str, ...] | None
    ) -> Any:
        if not data:
            return None
        if self._ignored_post:
            data = {key: value for key, value in data.items() if not _matches_any(self._ignored_post, key)}
        if keys:
            data = {
                key: jsonpaths.extract(data, key, strict=strict)
                if jsonpaths.is_path_key(key)
                else data.get(key)
                for key in keys
            }
        if not data:
            return data
        derender = self.derender_strict if strict else self.derender_lenient
        return values.normalize(
            data, self.config.post_data_schema or {}, strict=strict, derender_url=derender
        )

    # ------------------------------------------------------------- the events

    def event_url(self, event: NetworkEvent) -> Any:
        key = self.url_key
        memo = event.memo
        if key not in memo:
            memo[key] = self.url(event.url, strict=False)
        return memo[key]

    def fits(self, event: NetworkEvent) -> bool:
        """Method aside, whether `event` could be the expected one: base URL and referer fit (step 1)."""
        if self.last_segments is not None and not _path_may_match(event.path, self.last_segments):
            return False  # ruled out by its path alone, without the cost of reading the URL
        url = self.event_url(event)
        if not isinstance(url, Url):
            raise UnreadableEvent(f"Event URL '{event.url}' could not be read as a URL")
        if not self.expected_url.compare_path(url):
            return False
        referer = event.headers.get("referer")
        if self.expected_referer is not None and referer:
            # The reference compares the lower-cased header value here (and the raw one later).
            theirs = self.url(referer.lower(), strict=False)
            if not self.expected_referer.compare_path(theirs):
                return False
        return True

    def raw_event(self, event: NetworkEvent) -> dict[str, Any]:
        """What the evaluator reads from an event, before normalization."""
        raw: dict[str, Any] = {"url": event.url, "response_status": event.status, "http_method": event.method}
        if event.defects:
            raw["http_method"] = trace_defects.check_picked(self, event)
        if self.header_names:
            found = {
                name: event.headers[low] for name, low in self.header_names.items() if low in event.headers
            }
            if found:
                raw["headers"] = found
        if self.wants_post_data:
            data = bodies.post_data(event)
            if data is not None:
                raw["post_data"] = data
        if self.wants_content:
            content = bodies.response_content(event)
            if content is not None:
                raw["response_content"] = content
        if self.cookie_names:
            jar = {name: unquote(value) for name, value in event.response_cookies}
            cookies = {name: jar[name] for name in self.cookie_names if name in jar}
            if cookies:
                raw["response_cookies"] = cookies
        return raw

    def reports(self, event: NetworkEvent) -> tuple[Any, Any]:
        """The event's raw data and normalized view as JSON, for results (memoized)."""
        memo = event.memo
        if self.report_key not in memo:
            memo[self.report_key] = (
                _jsonable(self.raw_event(event)),
                values.report(self.normalized_event(event)),
            )
        return memo[self.report_key]

    def normalized_event(self, event: NetworkEvent) -> dict[str, Any]:
        key = self.normalized_key
        memo = event.memo
        if key not in memo:
            raw = self.raw_event(event)
            normalized = self._normalize_event(
                raw, strict=False, post_keys=self.post_keys, content_keys=self.content_keys
            )
            normalized["url"] = self.event_url(event)
            memo[key] = normalized
        return memo[key]


class UnreadableEvent(Exception):
    """A candidate event whose URL cannot be parsed: the reference stops with an error."""


def _last_segments(expected: Url, config: NetworkEventEvaluatorConfig) -> frozenset[str] | None:
    """Last path segments of the expected URLs, lower-cased, when a cheap path pre-check is safe.

    Not for patterns, base64 queries (they remove path segments), or a site root
    (derendering turns a URL's last segment into a placeholder).
    """
    if config.decode_base64_query:
        return None
    segments = set()
    for alternative in expected.alternatives:
        if alternative.is_regex or not alternative.base_url.startswith("__"):
            return None
        last = unquote(urlsplit(alternative.base_url).path.rstrip("/").rsplit("/", 1)[-1]).lower()
        if last.startswith("__") and last.endswith("__"):
            return None
        segments.add(last)
    return frozenset(segments)


def _path_may_match(path: str, segments: frozenset[str]) -> bool:
    """False only when the raw path's last segment cannot normalize to an expected one.

    Paths that URL normalization may reshape (escapes, which can hide `/`,
    dot segments, doubled slashes, non-ASCII) are never ruled out here.
    """
    if not path.isascii() or "%" in path or "//" in path or "/." in path or "\\" in path:
        return True
    return path.rstrip("/").rsplit("/", 1)[-1].lower() in segments


def _matches_any(patterns: Sequence[str], name: str) -> bool:
    for pattern in patterns:
        try:
            if re.search(pattern, name):
                return True
        except re.error:  # a broken pattern ignores nothing
            continue
    return False


def _stripped_keys(data: Any) -> tuple[str, ...] | None:
    return tuple(str(key).strip() for key in data) if data else None


def _pick(content: Any, keys: tuple[str, ...] | None, *, strict: bool) -> Any:
    """Response content reduced to the expected keys (plain keys if present, JSONPath keys extracted)."""
    if not keys:
        return content
    picked = {key: content[key] for key in keys if not jsonpaths.is_path_key(key) and key in content}
    for key in keys:
        if jsonpaths.is_path_key(key):
            picked[key] = jsonpaths.extract(content, key, strict=strict)
    return picked


def _jsonable(value: Any) -> Any:
    """Raw event data as JSON values (tuples from JSONPath become lists)."""
    if value is None:
        return None
    return json.loads(json.dumps(value, default=str))
