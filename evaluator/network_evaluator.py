"""NetworkEventEvaluator: did the agent's traffic contain the expected request?

Same verdicts as the reference evaluator, in four steps:

1. *Pick candidate events.* Navigate tasks checked with a GET look only at
   the last navigation event. Otherwise every evaluation event (static assets
   left out) whose method, base URL (`Url.compare_path`) and — when a referer
   is expected — referer base URL match is a candidate; `last_event_only`
   keeps just the last candidate.
2. *Expected event*, normalized strictly (an unusable expectation is an error).
3. *Each candidate*, normalized leniently: URL with query parameters, the
   expected headers, post data (ignored fields dropped, JSONPath keys
   extracted, `post_data_schema` applied), response content (JSONPath keys)
   and response cookies (URL-decoded).
4. *Compare*: success when some candidate matches every expected field
   (`should_not_exist` inverts: success when there is no candidate at all).

Speed: everything about the expected side is prepared once per
(config, task sites, site map) — a `_Plan` — and everything about an event is
memoized on the event under the plan's token, so evaluating the same trace
again (the live proxy does, and a trace only grows) costs a few dictionary
lookups per event. An event is only URL-parsed when its method already fits.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any
from urllib.parse import unquote, urlsplit

from evaluator import bodies, jsonpaths, values
from evaluator.compare import compare
from evaluator.results import Assertion, EvaluatorResult
from evaluator.sites import SiteMap
from evaluator.tasks import NetworkEventEvaluatorConfig, Task, TaskType
from evaluator.trace import NetworkEvent, NetworkTrace
from evaluator.values.url import Url

EVALUATOR_NAME = "NetworkEventEvaluator"
URL_HEADERS = ("redirect_url", "referer")
"""Expected header names whose values are compared as URLs (names as written in the task)."""

_tokens = itertools.count()
_PLANS: dict[tuple[Any, ...], tuple[NetworkEventEvaluatorConfig, _Plan | Exception]] = {}
_MAX_PLANS = 2048


class _Plan:
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

    def is_candidate(self, event: NetworkEvent) -> bool:
        """Method, base URL and referer fit (step 1); memoized per event."""
        if self.method and event.method != self.method:
            return False
        found = event.memo.get(self.candidate_key)
        if found is None:
            found = event.memo[self.candidate_key] = self._fits(event)
        return found

    def _fits(self, event: NetworkEvent) -> bool:
        if self.last_segments is not None and not _path_may_match(event.path, self.last_segments):
            return False  # ruled out by its path alone, without the cost of reading the URL
        url = self.event_url(event)
        if not isinstance(url, Url):
            raise _UnreadableEvent(f"Event URL '{event.url}' could not be read as a URL")
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


class _UnreadableEvent(Exception):
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


def _plan_for(config: NetworkEventEvaluatorConfig, task: Task, site_map: SiteMap) -> _Plan:
    key = (id(config), task.sites, task.task_type, site_map.key)
    cached = _PLANS.get(key)
    if cached is None or cached[0] is not config:
        if len(_PLANS) >= _MAX_PLANS:
            _PLANS.clear()
        try:
            plan: _Plan | Exception = _Plan(config, task, site_map)
        except Exception as error:
            plan = error
        cached = _PLANS[key] = (config, plan)
    if isinstance(cached[1], Exception):
        raise cached[1]
    return cached[1]


def candidates(plan: _Plan, trace: NetworkTrace) -> list[NetworkEvent]:
    """Step 1: the events that could be the expected one, in trace order.

    The search resumes where the previous evaluation of this trace stopped
    (traces only grow), and each event's verdict is memoized on the event.
    """
    if plan.navigate_only:
        navigations = trace.navigation_events
        return [navigations[-1]] if navigations else []
    events = trace.evaluation_events
    scanned, found = trace.memo.get(plan.candidate_key, (0, []))
    if scanned < len(events):
        found = list(found)
        method, key = plan.method, plan.candidate_key
        for event in events[scanned:]:
            if method and event.method != method:
                continue
            fits = event.memo.get(key)
            if fits is None:
                fits = event.memo[key] = plan._fits(event)
            if fits:
                found.append(event)
        trace.memo[plan.candidate_key] = (len(events), found)
    return found


def _assertions(plan: _Plan, actual: list[dict[str, Any]]) -> list[Assertion]:
    if plan.config.should_not_exist:
        if not actual:
            return []
        return [
            Assertion.failure(
                "unexpected_navigation_event",
                f"{len(actual)} event(s) match, but this evaluator requires that none does",
            )
        ]
    if not actual:
        return [
            Assertion.failure(
                "missing_navigation_event",
                "the trace holds no event with the expected method and URL path",
            )
        ]
    differences: list[str] = []
    for event in actual:
        mismatches = compare(
            event, plan.expected, ordered=False, value_name="network_event", ignore_extra_keys=True
        )
        if not mismatches:
            return []
        differences = [msg for item in mismatches for msg in (item.assertion_msgs or ())]
    return [
        Assertion.failure(
            "missing_navigation_event",
            f"{len(actual)} candidate event(s) checked, none matches every expected field",
            *differences[:5],
        )
    ]


def evaluate_network(
    config: NetworkEventEvaluatorConfig, trace: NetworkTrace, *, task: Task, site_map: SiteMap
) -> EvaluatorResult:
    """Judge `trace` against one NetworkEventEvaluator of `task` (never raises on bad input)."""
    normalized: list[dict[str, Any]] | None = None
    plan: _Plan | None = None
    events: list[NetworkEvent] = []
    try:
        plan = _plan_for(config, task, site_map)
        events = candidates(plan, trace)
        if config.last_event_only:
            events = events[-1:]
        normalized = [plan.normalized_event(event) for event in events]
        assertions = _assertions(plan, normalized)
        reports = [plan.reports(event) for event in events]
    except Exception as error:
        return EvaluatorResult.from_error(
            EVALUATOR_NAME,
            f"{EVALUATOR_NAME} could not evaluate task {task.task_id}: {error}",
            actual_normalized=values.report(normalized) if normalized is not None else None,
            expected=plan.expected_report if plan is not None else None,
            should_not_exist=config.should_not_exist,
        )
    return EvaluatorResult.from_assertions(
        EVALUATOR_NAME,
        assertions,
        actual=[raw for raw, _ in reports],
        actual_normalized=[view for _, view in reports],
        expected=plan.expected_report,
        should_not_exist=config.should_not_exist,
    )


def _jsonable(value: Any) -> Any:
    """Raw event data as JSON values (tuples from JSONPath become lists)."""
    if value is None:
        return None
    return json.loads(json.dumps(value, default=str))


def clear_plans() -> None:
    """Forget prepared configs (tests and long-running processes that reload task files)."""
    _PLANS.clear()


__all__ = ["EVALUATOR_NAME", "candidates", "clear_plans", "evaluate_network"]
