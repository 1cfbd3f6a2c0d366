"""Flawed trace files, judged as the reference judges them: a flaw is an error only when read.

The reference keeps each HAR entry as it is and reads a field only when one
of its evaluators needs it; a missing or mistyped field raises there, and the
evaluator is an `error`. The trace readers (`evaluator/har_import.py`) record
such fields as an event's `defects`, by the names below, and mark the trace;
the network evaluator then looks for candidates here, in the reference's
order of reading, instead of its fast path:

- every event's URL, for any network evaluator (static assets are told apart by it);
- the method of every evaluation event: a navigate task checked with a GET
  compares it exactly with "GET" (a lower-case "get" is no navigation), other
  checks lower-case it (it must be text);
- the request headers of every evaluation event that is a GET (navigate
  tasks), or whose method and URL path fit the expected event (other tasks);
- of the events picked: the URL (an empty one is refused), status, and the post data, response content,
  response cookies when the task checks them (`check_picked`), with the
  method as written.

Live traces never have defects (capture builds events from real messages),
so none of this runs for them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from webarena_live.evaluator.errors import TraceFormatError
from webarena_live.evaluator.values.url import Url

if TYPE_CHECKING:
    from webarena_live.evaluator.network_plan import Plan
    from webarena_live.evaluator.trace import NetworkEvent, NetworkTrace

URL = "url"
METHOD = "method"
"""Its value is the method as written (not text, or not upper case), or MISSING."""
HEADERS = "headers"
STATUS = "status"
POST_DATA = "post_data"
CONTENT = "response_content"
COOKIES = "response_cookies"

EMPTY_URL = "empty_url"
"""An empty URL: readable, but the reference's URL type refuses it, which only the reading order decides."""

REQUEST = (URL, HEADERS)
RESPONSE = (STATUS, CONTENT, COOKIES)
ALL = (*REQUEST, *RESPONSE, POST_DATA)


class _Missing:
    def __repr__(self) -> str:
        return "missing"


MISSING: Any = _Missing()

_MARK = "trace.defects"


def mark(trace: NetworkTrace) -> None:
    """Note that some event of `trace` has defects."""
    trace.memo[_MARK] = True


def has_defects(trace: NetworkTrace) -> bool:
    return _MARK in trace.memo


def _fail(event: NetworkEvent, key: str) -> None:
    defects = event.defects
    if defects and key in defects:
        raise TraceFormatError(f"the trace's entry for {event.url or 'an unknown URL'}: {defects[key]}")


def method_as_written(event: NetworkEvent) -> Any:
    """The method as the trace wrote it; an error when it wrote none."""
    defects = event.defects
    if not defects or METHOD not in defects:
        return event.method
    method = defects[METHOD]
    if method is MISSING:
        raise TraceFormatError(f"the trace's entry for {event.url or 'an unknown URL'} has no request.method")
    return method


def candidates(plan: Plan, trace: NetworkTrace) -> list[NetworkEvent]:
    """Step 1 of the network evaluator on a trace with defects, reading what the reference reads."""
    events = trace.events
    for event in events:
        _fail(event, URL)
    evaluation = [event for event in events if event.is_evaluation]
    if plan.navigate_only:
        last = None
        for event in evaluation:
            if method_as_written(event) != "GET":
                continue
            _fail(event, HEADERS)
            if event.is_navigation:
                last = event
        return [last] if last is not None else []
    found = []
    for event in evaluation:
        method = method_as_written(event)
        if plan.method:
            if not isinstance(method, str):
                raise TraceFormatError(
                    f"the trace's entry for {event.url}: request.method {method!r} is not text"
                )
            if method.lower() != plan.method.lower():
                continue
        url = plan.event_url(event)
        if not isinstance(url, Url) or (event.defects and EMPTY_URL in event.defects):
            raise TraceFormatError(f"Event URL '{event.url}' could not be read as a URL")
        if not plan.expected_url.compare_path(url):
            continue
        _fail(event, HEADERS)
        if plan.fits(event):
            found.append(event)
    return found


def check_picked(plan: Plan, event: NetworkEvent) -> Any:
    """What the reference reads of a picked event: errors for its defects there; its method as written."""
    _fail(event, EMPTY_URL)  # the reference's URL type refuses it, even leniently
    _fail(event, STATUS)
    if plan.wants_post_data:
        _fail(event, POST_DATA)
    if plan.wants_content:
        _fail(event, CONTENT)
    if plan.cookie_names:
        _fail(event, COOKIES)
    method = method_as_written(event)
    if not isinstance(method, str):
        raise TraceFormatError(f"the trace's entry for {event.url}: request.method {method!r} is not text")
    return method
