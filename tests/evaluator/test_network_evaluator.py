"""NetworkEventEvaluator on hand-built tasks and traces (parity with the oracle: test_network_parity)."""

from __future__ import annotations

import json
import statistics
import time
from typing import Any

import pytest

from webarena_live.evaluator.network_evaluator import candidates, evaluate_network
from webarena_live.evaluator.results import EvalStatus
from webarena_live.evaluator.sites import SiteMap
from webarena_live.evaluator.tasks import Task, parse_task
from webarena_live.evaluator.trace import NetworkEvent, NetworkTrace

SITES = SiteMap.from_dict(
    {
        "environments": {
            "__GITLAB__": {"urls": ["http://127.0.0.1:8023"]},
            "__SHOPPING__": {"urls": ["http://127.0.0.1:7770"]},
            "__SHOPPING_ADMIN__": {"urls": ["http://127.0.0.1:7780/admin"]},
        }
    }
)
NAV = (
    ("Accept", "text/html,application/xhtml+xml"),
    ("Sec-Fetch-Dest", "document"),
    ("Sec-Fetch-Mode", "navigate"),
)
XHR = (("Accept", "application/json"), ("Sec-Fetch-Dest", "empty"), ("Sec-Fetch-Mode", "cors"))
FORM = "application/x-www-form-urlencoded"


def make_task(task_type: str, *network: dict[str, Any], sites: tuple[str, ...] = ("gitlab",)) -> Task:
    return parse_task(
        {
            "sites": list(sites),
            "task_id": 9001,
            "intent_template_id": 1,
            "start_urls": ["__GITLAB__"],
            "intent": "test",
            "intent_template": "test",
            "instantiation_dict": {},
            "revision": 1,
            "eval": [
                {
                    "evaluator": "AgentResponseEvaluator",
                    "results_schema": {"type": "null"},
                    "expected": {"task_type": task_type, "status": "SUCCESS", "retrieved_data": None},
                },
                *({"evaluator": "NetworkEventEvaluator", **config} for config in network),
            ],
        }
    )


def nav(url: str, referer: str | None = None, status: int = 200) -> NetworkEvent:
    headers = NAV + ((("Referer", referer),) if referer else ())
    return NetworkEvent(method="GET", url=url, status=status, request_headers=headers)


def post(url: str, body: str, mime: str = FORM, status: int = 302, **more: Any) -> NetworkEvent:
    return NetworkEvent(
        method="POST",
        url=url,
        status=status,
        request_headers=XHR,
        post_data=body,
        post_data_mime=mime,
        **more,
    )


def judge(task: Task, *events: NetworkEvent) -> list[EvalStatus]:
    trace = NetworkTrace(events)
    return [evaluate_network(c, trace, task=task, site_map=SITES).status for c in task.network_configs]


OK, FAIL, ERR = EvalStatus.SUCCESS, EvalStatus.FAILURE, EvalStatus.ERROR


def test_navigate_is_judged_on_the_last_navigation_only() -> None:
    task = make_task(
        "NAVIGATE", {"expected": {"url": "__GITLAB__/a11y/-/issues", "query_params": {"state": ["opened"]}}}
    )
    good = nav("http://127.0.0.1:8023/a11y/-/issues/?state=opened")
    assert judge(task, nav("http://127.0.0.1:8023/"), good) == [OK]
    # A later navigation elsewhere wins, whatever came before...
    assert judge(task, good, nav("http://127.0.0.1:8023/help")) == [FAIL]
    # ...but XHRs and static assets after it do not count.
    xhr = NetworkEvent(method="GET", url="http://127.0.0.1:8023/api/x", status=200, request_headers=XHR)
    css = NetworkEvent(method="GET", url="http://127.0.0.1:8023/app.css", status=200, request_headers=NAV)
    assert judge(task, good, xhr, css) == [OK]
    assert judge(task, nav("http://127.0.0.1:8023/a11y/-/issues/?state=closed")) == [FAIL]
    assert judge(task) == [FAIL]


def test_mutation_with_form_post_data_and_status() -> None:
    config = {
        "expected": {
            "url": "__SHOPPING__/review/product/post/id/12",
            "http_method": "POST",
            "response_status": 302,
            "post_data": {"nickname": "Ann", "ratings[4]": ["19", "20"]},
        },
        "ignored_post_data_params_patterns": ["^form_key$"],
    }
    task = make_task("MUTATE", config, sites=("shopping",))
    url = "http://127.0.0.1:7770/review/product/post/id/12/"
    assert judge(task, post(url, "nickname=ANN+&ratings%5B4%5D=20&form_key=zz")) == [OK]
    assert judge(task, post(url, "nickname=Bob&ratings%5B4%5D=20")) == [FAIL]
    assert judge(task, post(url, "nickname=Ann&ratings%5B4%5D=20", status=500)) == [FAIL]
    # The last matching event decides (last_event_only defaults to true).
    assert judge(
        task, post(url, "nickname=Ann&ratings%5B4%5D=20"), post(url, "nickname=Bob&ratings%5B4%5D=20")
    ) == [FAIL]
    # Other paths and methods are not candidates at all.
    assert judge(task, post("http://127.0.0.1:7770/other", "nickname=Ann&ratings%5B4%5D=20")) == [FAIL]


def test_any_event_may_match_without_last_event_only() -> None:
    config = {
        "expected": {"url": "__GITLAB__/x", "http_method": "POST", "post_data": {"a": "1"}},
        "last_event_only": False,
    }
    task = make_task("MUTATE", config)
    first, second = (
        post("http://127.0.0.1:8023/x", "a=1", status=200),
        post("http://127.0.0.1:8023/x", "a=2", status=200),
    )
    assert judge(task, first, second) == [OK]
    assert judge(task, second) == [FAIL]


def test_jsonpath_post_data_and_schema() -> None:
    config = {
        "expected": {
            "url": "^__GITLAB__/api/v4/projects/\\d+/issues/\\d+$",
            "http_method": "PUT",
            "post_data": {"$.issue.assignee_ids": [7], "$.issue.title": "Fix it"},
        },
        "post_data_schema": {
            "type": "object",
            "properties": {"$.issue.assignee_ids": {"type": "array", "items": {"type": "number"}}},
        },
    }
    task = make_task("MUTATE", config)
    body = json.dumps({"issue": {"assignee_ids": [7], "title": "fix IT"}})
    event = NetworkEvent(
        method="PUT",
        url="http://127.0.0.1:8023/api/v4/projects/5/issues/3",
        status=200,
        request_headers=XHR,
        post_data=body,
        post_data_mime="application/json",
    )
    assert judge(task, event) == [OK]
    wrong = NetworkEvent(
        method="PUT",
        url="http://127.0.0.1:8023/api/v4/projects/5/issues/3",
        status=200,
        request_headers=XHR,
        post_data=body.replace("7", "8"),
        post_data_mime="application/json",
    )
    assert judge(task, wrong) == [FAIL]


def test_should_not_exist() -> None:
    config = {
        "expected": {"url": "__GITLAB__/x/delete", "http_method": "POST", "response_status": -1},
        "should_not_exist": True,
    }
    task = make_task("MUTATE", config)
    assert judge(task, nav("http://127.0.0.1:8023/x")) == [OK]
    # Any candidate event fails, whatever its status.
    assert judge(task, post("http://127.0.0.1:8023/x/delete", "a=1", status=500)) == [FAIL]


def test_referer_filters_candidates_and_is_compared_with_query() -> None:
    config = {
        "expected": {"url": "__GITLAB__/issues/5", "headers": {"referer": "__GITLAB__/issues/?state=opened"}}
    }
    task = make_task("RETRIEVE", config)
    target = "http://127.0.0.1:8023/issues/5"
    assert judge(task, nav(target, referer="http://127.0.0.1:8023/issues/?state=opened")) == [OK]
    assert judge(task, nav(target, referer="http://127.0.0.1:8023/ISSUES?state=OPENED")) == [OK]
    assert judge(task, nav(target, referer="http://127.0.0.1:8023/issues/?state=closed")) == [FAIL]
    assert judge(task, nav(target, referer="http://127.0.0.1:8023/elsewhere")) == [FAIL]
    assert judge(task, nav(target)) == [FAIL]  # a referer is expected: an event without one cannot match


def test_other_headers_and_cookies_are_patterns() -> None:
    config = {
        "expected": {
            "url": "__SHOPPING__/wishlist/index/add",
            "http_method": "POST",
            "headers": {"X-Requested-With": "XMLHttpRequest"},
            "response_cookies": {"mage-messages": "^.*toothpaste.* has been added to your wish list.*$"},
        }
    }
    task = make_task("MUTATE", config, sites=("shopping",))
    cookie = (
        (
            "mage-messages",
            "%5B%7B%22text%22%3A%22Crest%20Toothpaste%20has%20been%20added%20to%20your%20Wish%20List.%22%7D%5D",
        ),
    )
    event = NetworkEvent(
        method="POST",
        url="http://127.0.0.1:7770/wishlist/index/add/",
        status=200,
        request_headers=(*XHR, ("x-requested-with", "xmlhttprequest")),
        response_cookies=cookie,
    )
    assert judge(task, event) == [OK]
    no_cookie = NetworkEvent(
        method="POST",
        url="http://127.0.0.1:7770/wishlist/index/add/",
        status=200,
        request_headers=(*XHR, ("X-Requested-With", "XMLHttpRequest")),
    )
    assert judge(task, no_cookie) == [FAIL]


def test_response_content_jsonpath() -> None:
    config = {
        "expected": {
            "url": "__SHOPPING__/customer/section/load",
            "response_content": {"cart_qty": 1, "$.items[0].name": "Soap"},
        },
        # Unexpected query parameters fail a URL unless ignored.
        "ignored_query_params_patterns": ["^sections$"],
    }
    task = make_task("RETRIEVE", config, sites=("shopping",))

    def load(body: dict[str, Any]) -> NetworkEvent:
        return NetworkEvent(
            method="GET",
            url="http://127.0.0.1:7770/customer/section/load/?sections=cart",
            status=200,
            request_headers=XHR,
            response_body=json.dumps(body),
            response_mime="application/json",
        )

    assert judge(task, load({"cart_qty": 1, "items": [{"name": "Soap"}]})) == [OK]
    # Response content is compared as it is: no case folding.
    assert judge(task, load({"cart_qty": 1, "items": [{"name": "soap"}]})) == [FAIL]


def test_unconfigured_site_is_an_error() -> None:
    task = make_task("NAVIGATE", {"expected": {"url": "__REDDIT__/f/books"}}, sites=("reddit",))
    trace = NetworkTrace([nav("http://127.0.0.1:9999/f/books")])
    result = evaluate_network(task.network_configs[0], trace, task=task, site_map=SITES)
    assert result.status == ERR and result.score == 0.0
    assert "task 9001" in (result.error_msg or "") and "__REDDIT__" in (result.error_msg or "")


def test_result_reports_actual_and_expected() -> None:
    task = make_task("NAVIGATE", {"expected": {"url": "__GITLAB__/a?b=1"}})
    result = evaluate_network(
        task.network_configs[0], NetworkTrace([nav("http://127.0.0.1:8023/a?b=2")]), task=task, site_map=SITES
    )
    assert result.status == FAIL
    assert result.expected["url"] == {"base_url": "__GITLAB__/a", "query_params": {"b": ["1"]}}
    assert result.actual_normalized[0]["url"]["query_params"] == {"b": ["2"]}
    assert result.actual[0]["url"] == "http://127.0.0.1:8023/a?b=2"
    assert result.assertions and result.assertions[0].assertion_name == "missing_navigation_event"
    json.dumps(result.model_dump(mode="json"))  # results files must be JSON


def test_per_event_work_is_memoized_and_fast() -> None:
    config = {
        "expected": {
            "url": "__GITLAB__/api/v4/projects/1/star",
            "http_method": "POST",
            "response_status": 201,
        }
    }
    task = make_task("MUTATE", config)
    noise = []
    for n in range(999):
        if n % 3 == 0:
            noise.append(nav(f"http://127.0.0.1:8023/page/{n}?q={n}"))
        elif n % 3 == 1:
            noise.append(NetworkEvent(method="GET", url=f"http://127.0.0.1:8023/assets/{n}.js", status=200))
        else:
            noise.append(post(f"http://127.0.0.1:8023/api/v4/other/{n}", "a=1", status=200))
    trace = NetworkTrace([*noise, post("http://127.0.0.1:8023/api/v4/projects/1/star", "", status=201)])
    config_obj = task.network_configs[0]
    assert evaluate_network(config_obj, trace, task=task, site_map=SITES).status == OK
    # GET events were ruled out by method alone: never URL-parsed.
    assert not any(key[0] == "network.url" for key in noise[0].memo if isinstance(key, tuple))
    # The search is kept with the trace: the next evaluation looks at new events only.
    ((scanned, found),) = [
        v for k, v in trace.memo.items() if isinstance(k, tuple) and k[0] == "network.candidate"
    ]
    assert scanned == len(trace) and [event.url for event in found] == [trace.events[-1].url]
    timings = []
    for _ in range(50):
        start = time.perf_counter()
        evaluate_network(config_obj, trace, task=task, site_map=SITES)
        timings.append(time.perf_counter() - start)
    print(f"\nnetwork evaluation, {len(trace)}-event trace: median {statistics.median(timings) * 1e6:.0f} us")


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_candidates_skip_static_assets(method: str) -> None:
    config = {"expected": {"url": "^__GITLAB__/.*$", "http_method": method}}
    task = make_task("RETRIEVE", config)
    asset = NetworkEvent(method=method, url="http://127.0.0.1:8023/logo.png", status=200)
    page = NetworkEvent(method=method, url="http://127.0.0.1:8023/page", status=200)
    from webarena_live.evaluator.network_evaluator import _plan_for

    plan = _plan_for(task.network_configs[0], task, SITES)
    assert candidates(plan, NetworkTrace([asset, page, asset])) == [page]


def test_growing_trace_is_judged_on_all_its_events() -> None:
    """The live proxy evaluates a trace that keeps growing: later events must count."""
    config = {"expected": {"url": "__GITLAB__/x", "http_method": "POST", "post_data": {"a": "1"}}}
    task = make_task("MUTATE", config)
    config_obj = task.network_configs[0]
    trace = NetworkTrace([nav("http://127.0.0.1:8023/")])
    assert evaluate_network(config_obj, trace, task=task, site_map=SITES).status == FAIL
    trace.append(post("http://127.0.0.1:8023/x", "a=1", status=200))
    assert evaluate_network(config_obj, trace, task=task, site_map=SITES).status == OK
    trace.append(post("http://127.0.0.1:8023/x", "a=2", status=200))
    assert (
        evaluate_network(config_obj, trace, task=task, site_map=SITES).status == FAIL
    )  # the last one decides
    # The same events in another trace are judged afresh for that trace.
    other = NetworkTrace([trace.events[1]])
    assert evaluate_network(config_obj, other, task=task, site_map=SITES).status == OK
