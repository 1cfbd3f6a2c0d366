"""End to end: sessions, HTTPS, the event stream, HAR export and the control
API of a real `webarena-live serve` process, with real headless Chromium.

Sessions are told apart by the proxy credentials' username: Chromium sends
them after the session port's 407 challenge, `requests` sends them up front on
the proxy port, and traffic with no credentials at all belongs to `default`.
Each browser context sends its own User-Agent, so a trace or HAR holding a
request from another session is caught header by header.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests
from playwright.sync_api import Browser

from tests.site import agents
from tests.site.harness import (
    RESERVED_HOST,
    TASKS_FILE,
    FinishRecorder,
    ProxyProcess,
    free_port,
    start_proxy,
    wait_for,
    write_config,
)
from tests.site.live_fixtures import (
    assert_oracle_agrees,
    assert_verdict,
    run_task,
    session_context,
)
from tests.site.server import RunningSite
from tests.site.sse import EventStreamReader
from webarena_live.evaluator.har import load_trace

pytest_plugins = ["tests.site.live_fixtures"]
pytestmark = pytest.mark.timeout(180)


def user_agent(session: str) -> str:
    return f"Mozilla/5.0 (X11; Linux x86_64) webarena-live-test/{session}"


def har_user_agents(har: dict[str, Any]) -> set[str]:
    agents_seen = set()
    for entry in har["log"]["entries"]:
        for header in entry["request"]["headers"]:
            if header["name"].lower() == "user-agent":
                agents_seen.add(header["value"])
    return agents_seen


# -- 5. concurrent sessions ---------------------------------------------------


def test_concurrent_sessions_keep_their_own_events(
    live_proxy: ProxyProcess, live_browser: Browser, live_recorder: FinishRecorder, live_site: RunningSite
) -> None:
    control = live_proxy.control
    shop, forum = live_site.shop_http, live_site.forum_http
    # start_urls come back rendered with the site map's active URLs.
    assert control.start(9001, "alice")["start_urls"] == [shop]  # Chromium, shop, navigate
    assert control.start(9008, "bob")["start_urls"] == [forum]  # Chromium, forum, navigate
    control.start(9002, "carol")  # requests on the proxy port, shop, form post

    alice = session_context(
        live_browser, live_proxy, "alice", recorder=live_recorder, user_agent=user_agent("alice")
    ).new_page()
    bob = session_context(
        live_browser, live_proxy, "bob", recorder=live_recorder, user_agent=user_agent("bob")
    ).new_page()

    carol = requests.Session()
    carol.proxies = {"http": f"http://carol:secret@127.0.0.1:{live_proxy.port}"}
    carol.headers["User-Agent"] = user_agent("carol")
    carol_errors: list[BaseException] = []

    def carol_fills_the_contact_form() -> None:
        try:
            for _ in range(3):  # keeps her traffic going while the browsers browse
                page = carol.get(shop + "/contact", headers={"Accept": "text/html"}, timeout=10)
                assert page.status_code == 200
                time.sleep(0.05)
            sent = carol.post(
                shop + "/contact",
                data={
                    "name": "Carol",
                    "email": "hiker@example.com",
                    "subject": "Broken lantern",
                    "message": "!",
                },
                headers={"Referer": shop + "/contact", "Accept": "text/html"},
                timeout=10,
            )
            assert sent.status_code == 200 and sent.url == shop + "/contact/thanks"
        except BaseException as error:  # reported by the main thread
            carol_errors.append(error)

    carol_thread = threading.Thread(target=carol_fills_the_contact_form)
    carol_thread.start()
    # Alice and Bob take turns, page by page, while Carol runs in parallel.
    alice.goto(shop + "/")
    bob.goto(forum + "/f/hiking")
    with alice.expect_navigation():
        alice.click("#to-gear")
    with bob.expect_navigation():
        bob.click("#post-7")
    with alice.expect_navigation():
        alice.click("#product-2")
    carol_thread.join(timeout=30)
    assert not carol_errors, carol_errors
    alice.context.close()
    bob.context.close()

    # Carol finishes through the proxy, on the reserved host, as herself.
    reply = carol.post(f"http://{RESERVED_HOST}/sessions/carol/finish", json=agents.MUTATE_DONE, timeout=30)
    assert reply.status_code == 200, reply.text
    results = {
        "alice": control.finish("alice", agents.NAVIGATE_DONE),
        "bob": control.finish("bob", agents.NAVIGATE_DONE),
        "carol": reply.json(),
    }
    for name, task_id in (("alice", 9001), ("bob", 9008), ("carol", 9002)):
        assert_verdict(results[name], "success", task_id=task_id)
        live_recorder.record(name, live_proxy.output_dir, task_id, results[name])

    traces = {name: control.trace(name) for name in results}
    assert {e["url"].split("/")[2] for e in traces["alice"]} == {urlsplit(shop).netloc}
    assert {e["url"].split("/")[2] for e in traces["bob"]} == {urlsplit(forum).netloc}
    assert [(e["method"], e["url"]) for e in traces["carol"]] == [
        *[("GET", shop + "/contact")] * 3,
        ("POST", shop + "/contact"),
        ("GET", shop + "/contact/thanks"),
    ]
    assert shop + "/products/2" in [e["url"] for e in traces["alice"]]
    assert forum + "/f/hiking/7" in [e["url"] for e in traces["bob"]]
    for name in results:
        har = control.get(f"/sessions/{name}/har").json()
        assert har_user_agents(har) == {user_agent(name)}, name


def test_session_port_challenges_clients_without_credentials(live_proxy: ProxyProcess) -> None:
    reply = requests.get(
        "http://127.0.0.1:9/never-forwarded", proxies={"http": live_proxy.session_proxy_url}, timeout=10
    )
    assert reply.status_code == 407
    assert "proxy-authenticate" in {name.lower() for name in reply.headers}


def test_browser_without_credentials_is_the_default_session(
    live_proxy: ProxyProcess, live_browser: Browser, live_recorder: FinishRecorder, live_site: RunningSite
) -> None:
    started = live_proxy.control.start(9006)  # no session named: the default one
    assert started["session"] == "default"
    # No credentials on the proxy port: Chromium's cache stays on whatever the module's mode.
    har = live_recorder.browser_har_for("default")
    context = live_browser.new_context(proxy={"server": live_proxy.proxy_url}, record_har_path=str(har))
    try:
        response = agents.read_stock(context.new_page(), live_site.shop_http)
    finally:
        context.close()
    result = live_proxy.control.finish("default", response)
    assert_verdict(result, "success", task_id=9006)
    live_recorder.record("default", live_proxy.output_dir, 9006, result)
    api_calls = [e for e in live_proxy.control.trace("default") if e["url"].endswith("/api/products/2")]
    assert [(e["method"], e["status"], e["type"]) for e in api_calls] == [("GET", 200, "other")]


# -- HTTPS, the event stream, HAR export, the reserved host -------------------


def test_https_site_through_the_proxy(
    live_proxy: ProxyProcess, live_browser: Browser, live_recorder: FinishRecorder, live_site: RunningSite
) -> None:
    result = run_task(
        live_proxy, live_browser, live_recorder, task_id=9001, session="tls",
        agent=lambda page: agents.open_lantern_page(page, live_site.shop_https),
    )  # fmt: skip
    assert_verdict(result, "success", task_id=9001)
    urls = [e["url"] for e in live_proxy.control.trace("tls")]
    assert live_site.shop_https + "/products/2" in urls
    assert all(url.startswith(live_site.shop_https) for url in urls), urls


def test_event_stream_delivers_events_while_the_browser_browses(
    live_proxy: ProxyProcess, live_browser: Browser, live_recorder: FinishRecorder, live_site: RunningSite
) -> None:
    live_proxy.control.start(9001, "watched")
    stream = EventStreamReader(live_proxy.control_port, "watched")
    assert stream.response.status == 200
    assert stream.response.getheader("Content-Type", "").startswith("text/event-stream")
    stream.start()
    shop = live_site.shop_http
    context = session_context(live_browser, live_proxy, "watched", recorder=live_recorder)
    try:
        page = context.new_page()
        # Each page's event must arrive on the open stream before the agent
        # moves on: a stream that only flushed at the end would fail here.
        page.goto(shop + "/")
        wait_for(lambda: shop + "/" in stream.urls(), timeout=5, what="the home page event on the stream")
        with page.expect_navigation():
            page.click("#to-gear")
        wait_for(lambda: shop + "/category/gear" in stream.urls(), timeout=5, what="the gear page event")
        with page.expect_navigation():
            page.click("#product-2")
        wait_for(lambda: shop + "/products/2" in stream.urls(), timeout=5, what="the product page event")
    finally:
        context.close()
    result = live_proxy.control.finish("watched", agents.NAVIGATE_DONE)
    assert_verdict(result, "success", task_id=9001)
    live_recorder.record("watched", live_proxy.output_dir, 9001, result)
    stream.close()
    assert stream.error is None or isinstance(stream.error, OSError)
    streamed = stream.urls()  # once: the reader thread may still be appending
    assert streamed[:1] == [shop + "/"]
    assert streamed == [e["url"] for e in live_proxy.control.trace("watched")][: len(streamed)]


def test_har_export_of_a_running_session(
    live_proxy: ProxyProcess, live_browser: Browser, live_recorder: FinishRecorder, live_site: RunningSite
) -> None:
    shop = live_site.shop_http
    result = run_task(
        live_proxy, live_browser, live_recorder, task_id=9007, session="har",
        agent=lambda page: agents.wish_for_lantern(page, shop),
    )  # fmt: skip
    assert_verdict(result, "success", task_id=9007)
    reply = live_proxy.control.get("/sessions/har/har")
    assert reply.status_code == 200
    har = reply.json()
    assert har["log"]["version"] == "1.2"
    entries = har["log"]["entries"]
    (post,) = [e for e in entries if e["request"]["method"] == "POST"]
    assert post["request"]["url"] == shop + "/wishlist/add"
    assert post["request"]["postData"]["mimeType"].startswith("application/x-www-form-urlencoded")
    assert "product=2" in post["request"]["postData"]["text"]
    assert post["response"]["status"] == 302
    assert post["response"]["redirectURL"] in ("/wishlist", shop + "/wishlist")
    cookies = {c["name"]: c["value"] for c in post["response"]["cookies"]}
    assert "Trail%20Lantern%20has%20been%20added" in cookies["flash-messages"]
    # The same document the finish wrote for the oracle.
    written = json.loads((live_proxy.output_dir / "9007" / "network.har").read_text())
    assert [e["request"]["url"] for e in written["log"]["entries"]] == [e["request"]["url"] for e in entries]


def test_reserved_host_answers_through_the_proxy_and_is_not_captured(
    live_proxy: ProxyProcess, live_site: RunningSite
) -> None:
    live_proxy.control.start(9001, "probe")
    through_proxy = {"http": f"http://probe:x@127.0.0.1:{live_proxy.port}"}
    reply = requests.get(f"http://{RESERVED_HOST}/health", proxies=through_proxy, timeout=10)
    assert reply.status_code == 200
    assert reply.json()["status"] == "ok"
    assert reply.json()["tasks"] == len(json.loads(TASKS_FILE.read_text()))
    on_session_port = {"http": f"http://probe:x@127.0.0.1:{live_proxy.session_port}"}
    reply = requests.get(f"http://{RESERVED_HOST}/tasks/9001", proxies=on_session_port, timeout=10)
    assert reply.status_code == 200
    assert reply.json()["task_id"] == 9001
    assert reply.json()["start_urls"] == [live_site.shop_http]
    assert live_proxy.control.trace("probe") == []
    # An agent can start its own session through the proxy without naming it:
    # the proxy credentials it browses with name it.
    as_dana = {"http": f"http://dana:x@127.0.0.1:{live_proxy.session_port}"}
    start = {"task_id": 9008}
    reply = requests.post(f"http://{RESERVED_HOST}/sessions", json=start, proxies=as_dana, timeout=10)
    assert reply.status_code == 200, reply.text
    assert reply.json()["session"] == "dana"
    assert reply.json()["start_urls"] == [live_site.forum_http]
    assert live_proxy.control.trace("dana") == []


def test_control_errors_are_json_and_change_nothing(live_proxy: ProxyProcess) -> None:
    control = live_proxy.control
    before = control.get("/sessions").json()
    for reply in (
        control.post("/sessions", {"task_id": 123456, "session": "ghost"}),
        control.post("/sessions", {"session": "ghost"}),
        control.get("/sessions/ghost"),
        control.post("/sessions/ghost/finish", agents.NAVIGATE_DONE),
        control.get("/tasks/123456"),
    ):
        assert 400 <= reply.status_code < 500, (reply.request.method, reply.request.url, reply.status_code)
        assert reply.headers["Content-Type"].startswith("application/json")
        assert isinstance(reply.json()["error"], str)
    assert control.get("/sessions").json() == before


def test_failed_upstream_is_an_event_with_status_zero(
    live_proxy: ProxyProcess, live_browser: Browser, live_recorder: FinishRecorder, live_site: RunningSite
) -> None:
    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    live_proxy.control.start(9001, "unlucky")
    context = session_context(live_browser, live_proxy, "unlucky", recorder=live_recorder)
    try:
        page = context.new_page()
        page.goto(dead + "/", wait_until="commit")  # the proxy answers 502 for the failed connection
        agents.open_lantern_page(page, live_site.shop_http)
    finally:
        context.close()
    failed = [e for e in live_proxy.control.trace("unlucky") if e["url"].startswith(dead)]
    assert failed and all(e["status"] == 0 for e in failed), failed
    assert all(e.get("error") for e in failed), failed
    # The failed exchange is in the HAR too, and neither verdict trips over it.
    result = live_proxy.control.finish("unlucky", agents.NAVIGATE_DONE)
    assert_verdict(result, "success", task_id=9001)
    live_recorder.record("unlucky", live_proxy.output_dir, 9001, result)
    har = json.loads((live_proxy.output_dir / "9001" / "network.har").read_text())
    assert [e["response"]["status"] for e in har["log"]["entries"] if e["request"]["url"].startswith(dead)]


def test_restarting_a_session_clears_its_trace_and_a_finished_one_stays_finished(
    live_proxy: ProxyProcess, live_browser: Browser, live_recorder: FinishRecorder, live_site: RunningSite
) -> None:
    control = live_proxy.control
    control.start(9001, "again")
    context = session_context(live_browser, live_proxy, "again", recorder=live_recorder)
    try:
        page = context.new_page()
        agents.open_lantern_page(page, live_site.shop_http)  # the right page, but in the first attempt
        # Let the first attempt's last requests (the stock API call, the
        # favicon) complete, so none of them lands after the restart.
        page.wait_for_load_state("networkidle")
        api = live_site.shop_http + "/api/products/2"
        wait_for(lambda: api in [e["url"] for e in control.trace("again")], what="the stock API call")
        refused = control.post("/sessions", {"task_id": 9001, "session": "again"})
        assert refused.status_code == 409 and refused.json()["error"] == "session_running", refused.text
        assert len(control.trace("again")) > 0  # the refusal changed nothing
        control.start(9001, "again", restart=True)  # a fresh attempt
        assert control.trace("again") == []
        page.goto(live_site.shop_http + "/category/gear")  # the second attempt stops short
    finally:
        context.close()
    result = control.finish("again", agents.NAVIGATE_DONE)
    assert_verdict(result, "failure", task_id=9001)
    live_recorder.record("again", live_proxy.output_dir, 9001, result)
    written = (live_proxy.output_dir / "9001" / "eval_result.json").read_text()
    second = control.post("/sessions/again/finish", agents.NAVIGATE_DONE)  # the same answer: its result
    assert second.status_code == 200 and second.json()["status"] == "failure", second.text
    other = {**agents.NAVIGATE_DONE, "status": "FAILURE"}
    third = control.post("/sessions/again/finish", other)  # another answer: refused, both named
    assert third.status_code == 409 and third.json()["error"] == "different_answer", third.text
    assert third.json()["detail"]["refused"] == other
    assert control.get("/sessions/again").json()["result"]["status"] == "failure"
    assert (live_proxy.output_dir / "9001" / "eval_result.json").read_text() == written


def test_journal_keeps_every_event_when_the_proxy_is_killed(
    live_browser: Browser, live_site: RunningSite, tmp_path: Path
) -> None:
    config = write_config(tmp_path / "sites.json", live_site.site_map())
    proxy = start_proxy(tmp_path / "proxy", tasks=TASKS_FILE, config=config)
    try:
        proxy.control.start(9001, "doomed")
        context = session_context(live_browser, proxy, "doomed")
        try:
            agents.open_lantern_page(context.new_page(), live_site.shop_http)
        finally:
            context.close()
        # A request still open when the browser closed (the favicon, often)
        # is recorded as a failed exchange a moment later: compare the
        # journal with the trace once it has stopped changing.
        trace = proxy.control.settled_trace("doomed")
        captured = [(e["method"], e["url"], e["status"]) for e in trace]
        journal = proxy.control.get("/sessions/doomed").json()["journal"]
        proxy.process.kill()  # SIGKILL: no shutdown hook runs
        proxy.process.wait(timeout=10)
    finally:
        proxy.stop()
    assert journal, "the session reports no journal file"
    replayed = load_trace(Path(journal))
    assert [(e.method, e.url, e.status) for e in replayed] == captured
    assert live_site.shop_http + "/products/2" in [e.url for e in replayed.navigation_events]


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
            live_proxy, live_browser, live_recorder, task_id=9008, session="parity-alone",
            agent=lambda page: agents.open_forum_post(page, live_site.forum_http),
        )  # fmt: skip
    assert_oracle_agrees(live_recorder, live_site, live_workdir, oracle_python, official_dataset)
