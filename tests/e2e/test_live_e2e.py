"""End to end: a real headless Chromium browses the test site through a real
`webarena-live serve` process; each run ends with the finish call, whose
verdict must be right — and, at the end of the module, equal to the verdict
the oracle (webarena-verified 1.2.3) gives on the files the proxy wrote.

One test site, one proxy and one browser serve the whole module. Every run
gets its own session and its own browser context, and the module runs twice:
with the browser's cache on (the session's own address) and off (proxy
credentials on the session port, where Chromium answers the 407 challenge;
Playwright then turns the cache off). The test site answers revalidations
with 304 (tests/site/server.py), and every run is also judged by the oracle on
Playwright's own HAR of it (tests/support/threeway.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import requests
from playwright.sync_api import Browser, Page

from tests.site import agents
from tests.site.harness import (
    PREVIEW_CHECKS,
    PREVIEWS_OVERTAKEN,
    FinishRecorder,
    ProxyProcess,
    interference_grew,
    wait_for,
)
from tests.site.live_fixtures import assert_oracle_agrees, assert_verdict, evaluator_statuses, run_task
from tests.site.pages import LOGO_PNG
from tests.site.server import RunningSite

pytest_plugins = ["tests.site.live_fixtures"]
pytestmark = pytest.mark.timeout(180)

# -- 1. navigate --------------------------------------------------------------


def test_navigate_by_clicking_links_succeeds(
    live_proxy: ProxyProcess, live_browser: Browser, live_recorder: FinishRecorder, live_site: RunningSite
) -> None:
    result = run_task(
        live_proxy, live_browser, live_recorder, task_id=9001, session="nav-ok",
        agent=lambda page: agents.open_lantern_page(page, live_site.shop_http),
    )  # fmt: skip
    assert_verdict(result, "success", task_id=9001)
    assert evaluator_statuses(result) == {
        "AgentResponseEvaluator": ["success"],
        "NetworkEventEvaluator": ["success"],
    }


def test_navigate_stopping_one_page_short_fails(
    live_proxy: ProxyProcess, live_browser: Browser, live_recorder: FinishRecorder, live_site: RunningSite
) -> None:
    result = run_task(
        live_proxy, live_browser, live_recorder, task_id=9001, session="nav-short",
        agent=lambda page: agents.open_lantern_page(page, live_site.shop_http, stop_short=True),
    )  # fmt: skip
    assert_verdict(result, "failure", task_id=9001)
    # The answer itself is right; only the page reached is wrong.
    assert evaluator_statuses(result) == {
        "AgentResponseEvaluator": ["success"],
        "NetworkEventEvaluator": ["failure"],
    }


# -- revisits: the browser's cache (on: the session's own address; off: proxy credentials) --------


@pytest.mark.parametrize("how", ["reload", "back", "back-reload"])
def test_navigate_run_that_revisits_pages(
    how: str,
    live_proxy: ProxyProcess,
    live_browser: Browser,
    live_recorder: FinishRecorder,
    live_site: RunningSite,
) -> None:
    result = run_task(
        live_proxy, live_browser, live_recorder, task_id=9001, session=f"revisit-{how}",
        agent=lambda page: agents.revisit_lantern_page(page, live_site.shop_http, how=how),
    )  # fmt: skip
    # Going back, a browser with its cache on shows the page without asking anyone: neither the proxy
    # nor the browser's own HAR holds a navigation to it, so the last one is the page left.
    planned = "failure" if how == "back" and live_recorder.cache == "on" else "success"
    assert_verdict(result, planned, task_id=9001)
    statuses = [
        (e["url"], e["status"], e.get("wire_status")) for e in live_proxy.control.trace(f"revisit-{how}")
    ]
    answer_page = [entry for entry in statuses if entry[0] == live_site.shop_http + "/products/2"]
    if how != "back" and live_recorder.cache == "on":  # the reload revalidated: a 304 the page saw as 200
        assert answer_page[-1][1:] == (200, 304), statuses
    if live_recorder.cache == "off":
        assert all(wire is None for _url, _status, wire in statuses), statuses


def test_retrieve_after_a_reload_revalidates_the_fetched_json(
    live_proxy: ProxyProcess, live_browser: Browser, live_recorder: FinishRecorder, live_site: RunningSite
) -> None:
    result = run_task(
        live_proxy, live_browser, live_recorder, task_id=9006, session="stock-reload",
        agent=lambda page: agents.read_stock_after_reload(page, live_site.shop_http),
    )  # fmt: skip
    assert_verdict(result, "success", task_id=9006)
    calls = [e for e in live_proxy.control.trace("stock-reload") if e["url"].endswith("/api/products/2")]
    assert [e["status"] for e in calls] == [200, 200]
    # With the cache on the second call was revalidated: its body is the one the page was given.
    assert [e.get("wire_status") for e in calls] == (
        [None, 304] if live_recorder.cache == "on" else [None, None]
    )


# -- 2. mutate: form posts with redirects, fetch() JSON ----------------------


def test_urlencoded_form_post_with_redirect_succeeds(
    live_proxy: ProxyProcess, live_browser: Browser, live_recorder: FinishRecorder, live_site: RunningSite
) -> None:
    result = run_task(
        live_proxy, live_browser, live_recorder, task_id=9002, session="contact",
        agent=lambda page: agents.send_contact_message(page, live_site.shop_http),
    )  # fmt: skip
    assert_verdict(result, "success", task_id=9002)
    # The redirect is recorded hop by hop: the POST's 302, then the GET it led to.
    events = live_proxy.control.trace("contact")
    hops = [(e["method"], e["url"].removeprefix(live_site.shop_http), e["status"]) for e in events]
    post = hops.index(("POST", "/contact", 302))
    assert ("GET", "/contact/thanks", 200) in hops[post + 1 :], hops
    assert events[post]["type"] == "mutation"


def test_multipart_form_post_with_redirect_succeeds(
    live_proxy: ProxyProcess, live_browser: Browser, live_recorder: FinishRecorder, live_site: RunningSite
) -> None:
    result = run_task(
        live_proxy, live_browser, live_recorder, task_id=9003, session="review",
        agent=lambda page: agents.review_lantern(page, live_site.shop_http),
    )  # fmt: skip
    assert_verdict(result, "success", task_id=9003)


def test_multipart_form_post_with_wrong_value_fails(
    live_proxy: ProxyProcess, live_browser: Browser, live_recorder: FinishRecorder, live_site: RunningSite
) -> None:
    result = run_task(
        live_proxy, live_browser, live_recorder, task_id=9003, session="review-wrong",
        agent=lambda page: agents.review_lantern(page, live_site.shop_http, title="Too dim"),
    )  # fmt: skip
    assert_verdict(result, "failure", task_id=9003)
    assert evaluator_statuses(result)["NetworkEventEvaluator"] == ["failure"]


def test_multipart_form_post_with_a_binary_file_part_succeeds(
    live_proxy: ProxyProcess, live_browser: Browser, live_recorder: FinishRecorder, live_site: RunningSite
) -> None:
    # A photo (PNG bytes, not text in any encoding) next to the text fields the
    # task checks. Playwright's own HAR drops such a body altogether (Chromium
    # hands no file-backed upload data to CDP), so the reference harness would
    # score this run a failure; the proxy sees the real bytes.
    photo = LOGO_PNG * 8
    result = run_task(
        live_proxy, live_browser, live_recorder, task_id=9003, session="review-photo",
        agent=lambda page: agents.review_lantern(page, live_site.shop_http, photo=photo),
    )  # fmt: skip
    assert_verdict(result, "success", task_id=9003)
    if live_recorder.cache == "on":  # a context with proxy credentials records the body; one without does not
        why = "Playwright's HAR has no postData for a form with a file part (docs/notes/live-findings.md)"
        live_recorder.browser_differs("review-photo", "failure", why)


def test_fetch_json_post_checked_with_jsonpath_keys_succeeds(
    live_proxy: ProxyProcess, live_browser: Browser, live_recorder: FinishRecorder, live_site: RunningSite
) -> None:
    result = run_task(
        live_proxy, live_browser, live_recorder, task_id=9004, session="cart",
        agent=lambda page: agents.add_lanterns_to_cart(page, live_site.shop_http),
    )  # fmt: skip
    assert_verdict(result, "success", task_id=9004)
    events = live_proxy.control.trace("cart")
    posts = [e for e in events if e["method"] == "POST"]
    assert [e["url"] for e in posts] == [live_site.shop_http + "/api/cart/items"]
    assert posts[0]["type"] == "mutation"


def test_get_form_query_string_is_checked(
    live_proxy: ProxyProcess, live_browser: Browser, live_recorder: FinishRecorder, live_site: RunningSite
) -> None:
    right = run_task(
        live_proxy, live_browser, live_recorder, task_id=9009, session="search",
        agent=lambda page: agents.search_for_lantern(page, live_site.shop_http),
    )  # fmt: skip
    assert_verdict(right, "success", task_id=9009)
    wrong = run_task(
        live_proxy, live_browser, live_recorder, task_id=9009, session="search-wrong",
        agent=lambda page: agents.search_for_lantern(page, live_site.shop_http, query="lantern"),
    )  # fmt: skip
    assert_verdict(wrong, "failure", task_id=9009)


def test_should_not_exist_fails_a_run_that_made_the_forbidden_change(
    live_proxy: ProxyProcess, live_browser: Browser, live_recorder: FinishRecorder, live_site: RunningSite
) -> None:
    careful = run_task(
        live_proxy, live_browser, live_recorder, task_id=9010, session="kettle",
        agent=lambda page: agents.read_kettle_stock(page, live_site.shop_http),
    )  # fmt: skip
    assert_verdict(careful, "success", task_id=9010)
    careless = run_task(
        live_proxy, live_browser, live_recorder, task_id=9010, session="kettle-wish",
        agent=lambda page: agents.read_kettle_stock(page, live_site.shop_http, also_wish=True),
    )  # fmt: skip
    assert_verdict(careless, "failure", task_id=9010)
    assert evaluator_statuses(careless) == {
        "AgentResponseEvaluator": ["success"],
        "NetworkEventEvaluator": ["failure"],
    }


# -- 3. retrieve with type-aware normalization -------------------------------


def test_retrieve_answer_in_another_format_is_normalized(
    live_proxy: ProxyProcess, live_browser: Browser, live_recorder: FinishRecorder, live_site: RunningSite
) -> None:
    result = run_task(
        live_proxy, live_browser, live_recorder, task_id=9005, session="price",
        agent=lambda page: agents.read_price_and_release(page, live_site.shop_http),
    )  # fmt: skip
    assert_verdict(result, "success", task_id=9005)
    (response_result,) = result["evaluators_results"]
    # What the agent said ("$1,234.50", "March 5, 2024") is not what the task
    # file says (1234.5, "2024-03-05"); normalization makes them equal.
    assert "$1,234.50" in json.dumps(response_result["actual"])
    normalized = response_result["actual_normalized"]["retrieved_data"]
    assert normalized == response_result["expected"]["retrieved_data"]
    assert [(float(item["price"]), item["released"]) for item in normalized] == [(1234.5, "2024-03-05")]


def test_retrieve_wrong_answer_fails(
    live_proxy: ProxyProcess, live_browser: Browser, live_recorder: FinishRecorder, live_site: RunningSite
) -> None:
    def misread(page: Page) -> dict[str, Any]:
        response = agents.read_price_and_release(page, live_site.shop_http)
        response["results"][0]["price"] = "$1,334.50"
        return response

    result = run_task(
        live_proxy, live_browser, live_recorder, task_id=9005, session="price-wrong", agent=misread
    )
    assert_verdict(result, "failure", task_id=9005)


# -- 4. response content and response cookies --------------------------------


def test_response_content_checked_with_jsonpath_succeeds(
    live_proxy: ProxyProcess, live_browser: Browser, live_recorder: FinishRecorder, live_site: RunningSite
) -> None:
    result = run_task(
        live_proxy, live_browser, live_recorder, task_id=9006, session="stock",
        agent=lambda page: agents.read_stock(page, live_site.shop_http),
    )  # fmt: skip
    assert_verdict(result, "success", task_id=9006)
    assert evaluator_statuses(result)["NetworkEventEvaluator"] == ["success"]


def test_response_content_missing_when_the_api_was_never_called_fails(
    live_proxy: ProxyProcess, live_browser: Browser, live_recorder: FinishRecorder, live_site: RunningSite
) -> None:
    def guess(page: Page) -> dict[str, Any]:
        page.goto(live_site.shop_http + "/category/gear")  # never opens the product page
        return {"task_type": "retrieve", "status": "SUCCESS", "retrieved_data": [17]}

    result = run_task(
        live_proxy, live_browser, live_recorder, task_id=9006, session="stock-guess", agent=guess
    )
    assert_verdict(result, "failure", task_id=9006)
    assert evaluator_statuses(result) == {
        "AgentResponseEvaluator": ["success"],
        "NetworkEventEvaluator": ["failure"],
    }


def test_response_cookies_checked_with_regex_succeeds(
    live_proxy: ProxyProcess, live_browser: Browser, live_recorder: FinishRecorder, live_site: RunningSite
) -> None:
    result = run_task(
        live_proxy, live_browser, live_recorder, task_id=9007, session="wish",
        agent=lambda page: agents.wish_for_lantern(page, live_site.shop_http),
    )  # fmt: skip
    assert_verdict(result, "success", task_id=9007)


# -- outputs and parity -------------------------------------------------------


def test_finish_writes_the_reference_output_layout(
    live_proxy: ProxyProcess, live_browser: Browser, live_recorder: FinishRecorder, live_site: RunningSite
) -> None:
    result = run_task(
        live_proxy, live_browser, live_recorder, task_id=9005, session="layout",
        agent=lambda page: agents.read_price_and_release(page, live_site.shop_http),
    )  # fmt: skip
    task_dir = live_proxy.output_dir / "9005"
    # Exactly these four once the writes settle: a replaced network.har is
    # parked as a hidden `.network.har.*.old` and deleted in the background
    # (addon/runs/har_spool.py), so allow that a few seconds; nothing may remain.
    expected = ["agent_response.json", "attempt.json", "eval_result.json", "network.har"]
    wait_for(
        lambda: sorted(p.name for p in task_dir.iterdir()) == expected,
        timeout=10,
        what=f"{task_dir} to hold exactly {expected}",
    )
    # The agent used the seed's names; the file holds the official ones.
    written = json.loads((task_dir / "agent_response.json").read_text())
    assert written["task_type"].upper() == "RETRIEVE"  # values are case-insensitive for the oracle too
    assert written["status"].upper() == "SUCCESS"
    assert written["retrieved_data"] == [{"price": "$1,234.50", "released": "March 5, 2024"}]
    assert "action" not in written and "results" not in written
    on_disk = json.loads((task_dir / "eval_result.json").read_text())
    assert on_disk["status"] == result["status"] == "success"
    assert on_disk["task_id"] == 9005
    har = json.loads((task_dir / "network.har").read_text())
    urls = [entry["request"]["url"] for entry in har["log"]["entries"]]
    assert live_site.shop_http + "/products/2" in urls


def test_oracle_agrees_with_every_live_finish(
    live_proxy: ProxyProcess,
    live_browser: Browser,
    live_recorder: FinishRecorder,
    live_site: RunningSite,
    live_workdir: Path,
    oracle_python: Path,
    official_dataset: Path,
) -> None:
    if not live_recorder.finishes:  # this test run on its own: make one finish to judge
        run_task(
            live_proxy, live_browser, live_recorder, task_id=9001, session="parity-alone",
            agent=lambda page: agents.open_lantern_page(page, live_site.shop_http),
        )  # fmt: skip
    whole_module = len(live_recorder.finishes) > 1
    # The whole module with the cache on met revalidations (the revisit tests); none without it.
    least = 3 if whole_module and live_recorder.cache == "on" else 0
    assert_oracle_agrees(
        live_recorder, live_site, live_workdir, oracle_python, official_dataset, revalidated_at_least=least
    )
    if whole_module:  # parity was checked on both kinds of verdict
        assert {f.live_status for f in live_recorder.finishes} == {"success", "failure"}


def test_a_finish_after_quiet_traffic_is_compared_with_its_preview(
    live_proxy: ProxyProcess, live_site: RunningSite
) -> None:
    """Every finish through the harness is checked against the preview just before it, to the letter
    unless the session's trace grew between the two; with nothing in flight it is compared."""
    body = {"task_id": 9001, "session": "quiet", "run": "quiet"}
    assert live_proxy.control.post("/sessions", body).status_code == 200
    through = live_proxy.session_proxy_url.replace("http://", "http://quiet:x@")
    assert requests.get(live_site.shop_http + "/", proxies={"http": through}, timeout=30).status_code == 200
    checked, overtaken = len(PREVIEW_CHECKS), len(PREVIEWS_OVERTAKEN)
    live_proxy.control.finish("quiet", agents.NAVIGATE_DONE)
    assert (len(PREVIEW_CHECKS), len(PREVIEWS_OVERTAKEN)) == (checked + 1, overtaken)


def test_a_finish_may_name_more_of_the_others_changes_than_its_preview() -> None:
    """Between a preview and its finish another session's change may land on the shared copy (a browser
    left a DokuWiki edit page just before): the finish names it too, wherever it sorts by when it was
    sent, with the count grown by one; the check of every finish (`check_preview`) lets that through."""
    one, two, late = ({"session": "b", "method": "POST", "url": path} for path in ("/x", "/y", "/ajax"))
    seen = {"exposed": True, "mutations": [one, two], "replicas": {"__WIKI__": "w"}, "count": 2}
    assert interference_grew(seen, {**seen, "mutations": [one, two, late], "count": 3})
    assert interference_grew(seen, {**seen, "mutations": [one, late, two], "count": 3})  # sent earlier
    assert interference_grew({**seen, "exposed": False, "mutations": [], "count": 0}, {**seen, "count": 2})
    assert not interference_grew(seen, seen)  # equal: compared as it is
    assert not interference_grew(seen, {**seen, "mutations": [two, one, late], "count": 3})  # reordered
    assert not interference_grew(seen, {**seen, "mutations": [one, late], "count": 2})  # one replaced
    assert not interference_grew(seen, {**seen, "mutations": [one, two, late], "count": 2})  # miscounted
    assert not interference_grew(seen, {**seen, "mutations": [one, two, late], "count": 3, "replicas": {}})
