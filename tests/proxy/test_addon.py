"""The addon's hooks inside mitmproxy's own test harness (`taddons`, `tflow`)."""

from __future__ import annotations

import asyncio
import base64
import json

import pytest
from mitmproxy import exceptions
from mitmproxy.test import taddons, tflow

from tests.support.addon_helpers import (
    NAVIGATE_TASK,
    SHOP,
    browser_headers,
    make_flow,
    write_config,
    write_tasks,
)
from webarena_live.control.authority import PoolAuthority, ToldLeases
from webarena_live.proxy.addon import CAPTURED_KEY, WebArenaLive
from webarena_live.proxy.credentials import proxy_username
from webarena_live.runs.sessions import DEFAULT_SESSION, EVENT, STARTED

SESSION_PORT = 8082


def credentials(user: str, password: str = "x") -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def configure_with_files(tctx, addon: WebArenaLive, tmp_path, **more) -> None:
    """The addon configured on the test tasks and site map, its outputs under `tmp_path`."""
    tctx.configure(
        addon,
        webarena_tasks=str(write_tasks(tmp_path)),
        webarena_config=str(write_config(tmp_path)),
        webarena_output_dir=str(tmp_path / "out"),
        **more,
    )


@pytest.fixture
def live(tmp_path):
    addon = WebArenaLive()
    with taddons.context(addon) as tctx:
        configure_with_files(tctx, addon, tmp_path, webarena_session_port=SESSION_PORT)
        yield addon


def run_flow(addon: WebArenaLive, flow, *, port: int = 8080):
    """Drive a flow through the hooks in mitmproxy's order: requestheaders, request, response/error."""
    flow.client_conn.sockname = ("127.0.0.1", port)
    upstream, flow.response = flow.response, None  # the server answers only after the request hooks
    addon.requestheaders(flow)
    if flow.response is None:
        served = addon.request(flow)  # the reserved host's app: a coroutine for the proxy's loop
        if served is not None:
            asyncio.run(served)
    if flow.response is None:
        flow.response = upstream
    if flow.error is not None:
        addon.error(flow)
    else:
        addon.response(flow)
    return flow


def trace_urls(addon: WebArenaLive, session: str) -> list[str]:
    assert addon.context is not None
    found = addon.context.sessions.get(session)
    return [event.url for event in found.trace] if found else []


def test_configure_loads_tasks_site_map_and_journal_dir(live, tmp_path):
    assert live.context is not None
    assert NAVIGATE_TASK in live.context.tasks
    assert live.context.site_map.render("__SHOPPING__/x", sites=["shopping"]) == f"{SHOP}/x"
    assert live.context.settings.journal_dir == tmp_path / "out" / ".journal"


def test_bad_task_file_is_an_options_error(tmp_path):
    addon = WebArenaLive()
    broken = tmp_path / "broken.json"
    broken.write_text('[{"task_id": 1}]')
    with taddons.context(addon) as tctx, pytest.raises(exceptions.OptionsError, match="task 1"):
        tctx.configure(addon, webarena_tasks=str(broken))


def test_missing_config_is_an_options_error(tmp_path):
    addon = WebArenaLive()
    with taddons.context(addon) as tctx, pytest.raises(exceptions.OptionsError):
        missing = str(tmp_path / "none.json")
        tctx.configure(addon, webarena_tasks=str(write_tasks(tmp_path)), webarena_config=missing)


def test_proxy_port_without_credentials_goes_to_default(live):
    run_flow(live, make_flow(url=f"{SHOP}/a", headers=browser_headers(navigate=True)))
    assert trace_urls(live, DEFAULT_SESSION) == [f"{SHOP}/a"]


def test_credentials_name_the_session_and_are_not_forwarded(live):
    headers = {"Proxy-Authorization": credentials("alice"), "Accept": "text/html"}
    flow = make_flow(url=f"{SHOP}/b", headers=headers)
    run_flow(live, flow)
    assert "proxy-authorization" not in flow.request.headers
    assert trace_urls(live, "alice") == [f"{SHOP}/b"]
    assert trace_urls(live, DEFAULT_SESSION) == []


def test_session_port_challenges_requests_without_credentials(live):
    flow = run_flow(live, make_flow(url=f"{SHOP}/c", status=None), port=SESSION_PORT)
    assert flow.response is not None and flow.response.status_code == 407
    assert flow.response.headers["Proxy-Authenticate"] == 'Basic realm="webarena-live"'
    assert trace_urls(live, DEFAULT_SESSION) == []  # the challenge is not an event
    assert live.context is not None and len(live.context.sessions) == 0


def test_credentials_on_connect_stick_to_the_connection(live):
    """HTTPS: the CONNECT carries credentials, the requests inside the tunnel (HTTP/1 or HTTP/2) do not."""
    connect = tflow.tflow(req=None)
    connect.request.method = "CONNECT"
    connect.request.headers["Proxy-Authorization"] = credentials("bob")
    connect.client_conn.sockname = ("127.0.0.1", SESSION_PORT)
    live.http_connect(connect)
    assert connect.response is None  # let through
    for path in ("/x", "/y"):
        inner = make_flow(url=f"https://shop.test{path}", headers=browser_headers(navigate=True))
        inner.client_conn = connect.client_conn
        run_flow(live, inner, port=SESSION_PORT)
        assert inner.response is not None and inner.response.status_code == 200
    assert trace_urls(live, "bob") == ["https://shop.test/x", "https://shop.test/y"]


def test_connect_without_credentials_on_the_session_port_is_challenged(live):
    connect = tflow.tflow()
    connect.response = None
    connect.request.method = "CONNECT"
    connect.client_conn.sockname = ("127.0.0.1", SESSION_PORT)
    live.http_connect(connect)
    assert connect.response is not None and connect.response.status_code == 407


def test_connections_keep_their_own_sessions(live):
    alice = make_flow(url=f"{SHOP}/1", headers={"Proxy-Authorization": credentials("alice")})
    bob = make_flow(url=f"{SHOP}/2", headers={"Proxy-Authorization": credentials("bob")})
    run_flow(live, alice, port=SESSION_PORT)
    run_flow(live, bob, port=SESSION_PORT)
    again = make_flow(url=f"{SHOP}/3")
    again.client_conn = alice.client_conn  # keep-alive: no credentials repeated
    run_flow(live, again, port=SESSION_PORT)
    assert trace_urls(live, "alice") == [f"{SHOP}/1", f"{SHOP}/3"]
    assert trace_urls(live, "bob") == [f"{SHOP}/2"]


def test_control_api_through_the_reserved_host(live):
    body = json.dumps({"task_id": NAVIGATE_TASK}).encode()
    headers = {"Proxy-Authorization": credentials("carol"), "Content-Type": "application/json"}
    flow = make_flow("POST", "http://webarena-live.invalid/sessions", body=body, status=None, headers=headers)
    run_flow(live, flow)
    assert flow.response is not None and flow.response.status_code == 200
    answer = json.loads(flow.response.content or b"")
    assert answer["session"] == "carol" and answer["start_urls"] == [f"{SHOP}/"]
    assert flow.response.headers["Content-Type"] == "application/json"
    assert trace_urls(live, "carol") == []  # control requests are never events


def test_the_reserved_host_serves_the_event_stream_as_a_snapshot_and_ignores_a_forged_caller(live):
    """mitmproxy buffers the reserved host's answers: the stream is what it opens with, then it ends.
    The caller comes from the proxy credentials only, never from a header the client sent."""
    body = json.dumps({"task_id": NAVIGATE_TASK}).encode()
    forged = {"Proxy-Authorization": credentials("dave"), "X-WebArena-Live-Caller": "mallory"}
    start = make_flow("POST", "http://webarena-live.invalid/sessions", body=body, status=None, headers=forged)
    run_flow(live, start)
    assert start.response is not None and json.loads(start.response.content or b"")["session"] == "dave"
    run_flow(live, make_flow(url=f"{SHOP}/products/7", headers={"Proxy-Authorization": credentials("dave")}))
    for target, seen in (("/sessions/dave/events", f"{SHOP}/products/7"), ("/events", '"session":"dave"')):
        flow = run_flow(live, make_flow(url=f"http://webarena-live.invalid{target}", status=None))
        assert flow.response is not None and flow.response.status_code == 200
        assert flow.response.headers["Content-Type"] == "text/event-stream"
        assert seen.encode() in (flow.response.content or b"")
    assert trace_urls(live, "dave") == [f"{SHOP}/products/7"]  # control requests are never events
    assert live.context is not None and live.context.sessions.get("mallory") is None


def test_control_api_needs_no_credentials_on_the_session_port(live):
    health = make_flow(url="http://webarena-live.invalid/health", status=None)
    flow = run_flow(live, health, port=SESSION_PORT)
    assert flow.response is not None and flow.response.status_code == 200


def test_failed_flow_is_captured_once(live):
    flow = make_flow(url=f"{SHOP}/down", status=None, error="connection refused")
    run_flow(live, flow)
    live.error(flow)  # a second error hook call must not add a second event
    assert live.context is not None
    (event,) = live.context.sessions.get_or_create(DEFAULT_SESSION).trace
    assert event.status == 0 and event.error == "connection refused"
    assert flow.metadata[CAPTURED_KEY]


def test_error_after_a_captured_response_adds_nothing(live):
    flow = run_flow(live, make_flow(url=f"{SHOP}/ok"))
    from mitmproxy import flow as mflow

    flow.error = mflow.Error("client disconnected")
    live.error(flow)
    assert trace_urls(live, DEFAULT_SESSION) == [f"{SHOP}/ok"]


def test_malformed_credentials_fall_back_to_default_on_the_proxy_port(live):
    run_flow(live, make_flow(url=f"{SHOP}/m", headers={"Proxy-Authorization": "Basic !!!"}))
    run_flow(live, make_flow(url=f"{SHOP}/n", headers={"Proxy-Authorization": "Bearer token"}))
    assert trace_urls(live, DEFAULT_SESSION) == [f"{SHOP}/m", f"{SHOP}/n"]


def test_session_name_with_control_characters_is_challenged(live):
    flow = run_flow(live, make_flow(url=f"{SHOP}/q", headers={"Proxy-Authorization": credentials("a\tb")}))
    assert flow.response is not None and flow.response.status_code == 407


def test_proxy_username():
    assert proxy_username(credentials("alice", "pw:with:colons")) == "alice"
    assert proxy_username("basic " + base64.b64encode(b"bob:").decode()) == "bob"
    assert proxy_username(credentials("")) is None
    assert proxy_username(None) is None
    assert proxy_username("Digest abc") is None


def test_reconfiguring_keeps_sessions_and_moves_the_journal(tmp_path):
    addon = WebArenaLive()
    with taddons.context(addon) as tctx:
        tasks = str(write_tasks(tmp_path))
        config = str(write_config(tmp_path))
        tctx.configure(
            addon, webarena_tasks=tasks, webarena_config=config, webarena_output_dir=str(tmp_path / "a")
        )
        run_flow(addon, make_flow(url=f"{SHOP}/1"))
        tctx.configure(addon, webarena_output_dir=str(tmp_path / "b"))
        assert trace_urls(addon, DEFAULT_SESSION) == [f"{SHOP}/1"]
        assert addon.context is not None and addon.context.output_dir == tmp_path / "b"
        addon.context.sessions.start(DEFAULT_SESSION, addon.context.tasks[NAVIGATE_TASK])
        run_flow(addon, make_flow(url=f"{SHOP}/2"))
    assert len(list((tmp_path / "a" / ".journal").glob("*.jsonl"))) == 1
    assert len(list((tmp_path / "b" / ".journal").glob("*.jsonl"))) == 1


def test_tasks_whose_sites_the_map_lacks_are_refused_at_configure(tmp_path):
    addon = WebArenaLive()
    with taddons.context(addon) as tctx:
        with pytest.raises(exceptions.OptionsError, match=r"no --config given: no URLs for __SHOPPING__"):
            tctx.configure(addon, webarena_tasks=str(write_tasks(tmp_path)))
        tctx.configure(addon)  # the embedded demo tasks need no site map
        assert addon.context is not None and addon.context.tasks.is_embedded_demo


def test_a_worker_told_its_front_after_its_other_options_keeps_no_pool(tmp_path):
    """`serve` sets `--set` options (a worker's `webarena_front`) after the flags: the pool the flags
    built goes once the front is known, so the worker neither leases nor times leases out itself."""
    addon = WebArenaLive()
    with taddons.context(addon) as tctx:
        configure_with_files(tctx, addon, tmp_path, webarena_lease_timeout="2")
        assert addon.context is not None and isinstance(
            addon.context.authority, PoolAuthority
        )  # a process's own
        built = addon.context.authority.pool
        tctx.configure(addon, webarena_front="127.0.0.1:9")
        assert addon.context is not None and isinstance(addon.context.authority, ToldLeases)
        assert addon.context.mutations is not None  # what the front gathers from it ...
        assert addon.context.mutations is not built.log  # ... which no pool here takes any more


def test_the_body_counting_hears_of_every_flow_once_and_a_captured_one_after_its_answer(live):
    """`flow_done` (serve's body counting): a captured flow's once the loop turn released its answer, a
    flow with nothing captured at once, a flow that failed once (with or without a response)."""
    from mitmproxy import flow as mflow

    told: list[tuple[str, bool]] = []
    answers: dict[str, object] = {}

    def flow_done(flow) -> None:
        released = answers.get(flow.request.path)
        told.append((flow.request.path, released is None or released.done()))

    live.flow_done = flow_done

    async def drive() -> None:
        page = make_flow(url=f"{SHOP}/page")
        live.requestheaders(page)
        answers["/page"] = waiting = live.response(page)
        assert waiting is not None and told == []  # not before the turn's write
        await waiting
        await asyncio.sleep(0)
        refused = make_flow(url=f"{SHOP}/refused", status=None, error="connection refused")
        live.requestheaders(refused)
        answers["/refused"] = live.error(refused)
        await answers["/refused"]
        cut = make_flow(url=f"{SHOP}/cut")  # the body broke off: no `response` hook, then `error`
        cut.error = mflow.Error("peer closed", timestamp=1_700_000_000.5)
        live.requestheaders(cut)
        answers["/cut"] = live.error(cut)
        await answers["/cut"]
        control = make_flow(url="http://webarena-live.invalid/health", status=200)
        live.requestheaders(control)
        assert live.response(control) is None  # never an event: told at once

    asyncio.run(drive())
    assert told == [("/page", True), ("/refused", True), ("/cut", True), ("/health", True)]


def test_with_nobody_watching_a_captured_event_is_announced_to_no_one(live, monkeypatch):
    # The session addresses hear the sessions' notices as a role (told every notice but events), so
    # capture publishes nothing per flow unless someone watches; a watcher is told each event.
    assert live.context is not None
    notices = live.context.sessions.notices
    assert not notices and notices.count() == 0
    told: list[str] = []
    monkeypatch.setattr(live.addresses, "on_notice", lambda _session, kind, _payload: told.append(kind))
    live.addresses.attach(live.context.sessions)  # again, as a reconfigure would: the role is replaced
    live.context.sessions.start(DEFAULT_SESSION, live.context.tasks[NAVIGATE_TASK])
    published: list[str] = []
    real_publish = notices.publish
    monkeypatch.setattr(notices, "publish", lambda *args: published.append(args[1]) or real_publish(*args))
    run_flow(live, make_flow(url=f"{SHOP}/1"))
    assert trace_urls(live, DEFAULT_SESSION) == [f"{SHOP}/1"] and published == []
    assert told == [STARTED]  # once, though attached twice
    heard: list[str] = []
    notices.subscribe(lambda _session, kind, _payload: heard.append(kind))
    run_flow(live, make_flow(url=f"{SHOP}/2"))
    assert heard == [EVENT] and told == [STARTED]  # the role is not told events
