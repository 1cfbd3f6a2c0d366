"""End to end: what the proxy must pass through untouched — streamed large
bodies, WebSockets, HTTP/2 — and the addon loaded into plain `mitmdump -s`.

This module's proxy runs with mitmproxy's `stream_large_bodies`, so a big
response is forwarded chunk by chunk and never held whole by the proxy; the
event for it must keep no body, while small JSON answers keep theirs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import requests
from playwright.sync_api import Browser
from playwright.sync_api import Error as PlaywrightError

from tests.site import agents
from tests.site.harness import (
    CHROMIUM,
    CHROMIUM_ARGS,
    TASKS_FILE,
    FinishRecorder,
    ProxyProcess,
    ca_spki_pin,
    start_proxy,
    write_config,
)
from tests.site.live_fixtures import (
    assert_oracle_agrees,
    assert_verdict,
    run_task,
    session_context,
)
from tests.site.server import CATALOG_BYTES, RunningSite

pytest_plugins = ["tests.site.live_fixtures"]
pytestmark = pytest.mark.timeout(180)
CACHE_MODES = ("off",)
"""Transport tests (streams, websockets, HTTP/2, a pinned CA): the cache is the other modules' concern."""

PROXY_OPTIONS = ("ssl_insecure=true", "stream_large_bodies=256k")


def har_entry(proxy: ProxyProcess, session: str, url: str) -> dict[str, Any]:
    har = proxy.control.get(f"/sessions/{session}/har").json()
    (entry,) = [e for e in har["log"]["entries"] if e["request"]["url"] == url]
    return entry


def test_large_body_streams_through_intact_and_is_not_kept(
    live_proxy: ProxyProcess, live_site: RunningSite
) -> None:
    live_proxy.control.start(9006, "bulk")
    client = requests.Session()
    client.proxies = {"http": f"http://bulk:x@127.0.0.1:{live_proxy.port}"}
    big_url = live_site.shop_http + "/api/catalog.json"
    small_url = live_site.shop_http + "/api/products/2"

    through_proxy = client.get(big_url, timeout=30)
    direct = requests.get(big_url, timeout=30)
    assert through_proxy.status_code == 200
    assert len(through_proxy.content) >= CATALOG_BYTES * 0.9
    assert through_proxy.content == direct.content
    small_answer = client.get(small_url, timeout=10)
    assert small_answer.json()["sku"] == "TL-200"
    assert small_answer.headers["Content-Encoding"] == "gzip"  # passed through as the server sent it

    events = {e["url"]: e for e in live_proxy.control.trace("bulk")}
    assert events[big_url]["status"] == 200
    assert events[small_url]["status"] == 200
    big = har_entry(live_proxy, "bulk", big_url)
    assert not big["response"]["content"].get("text"), "a streamed body must not be kept"
    small = har_entry(live_proxy, "bulk", small_url)  # kept decoded, as HAR wants it
    assert json.loads(small["response"]["content"]["text"])["stock"]["count"] == 17


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_websocket_passes_through(
    live_proxy: ProxyProcess, live_browser: Browser, live_site: RunningSite, scheme: str
) -> None:
    base = live_site.shop_http if scheme == "http" else live_site.shop_https
    session = f"chat-{scheme}"
    live_proxy.control.start(9001, session)
    context = session_context(live_browser, live_proxy, session)
    try:
        page = context.new_page()
        page.goto(base + "/chat")
        page.wait_for_function(
            "document.getElementById('chat').textContent === 'echo: hello'", timeout=10_000
        )
    finally:
        context.close()
    urls = [e["url"] for e in live_proxy.control.trace(session)]
    assert base + "/chat" in urls
    # Traffic after the WebSocket still lands in the session.
    assert live_proxy.control.get(f"/sessions/{session}").status_code == 200


def test_http2_site_through_the_proxy(
    live_proxy: ProxyProcess, live_browser: Browser, live_recorder: FinishRecorder, live_site: RunningSite
) -> None:
    # The upstream speaks HTTP/2 only, so mitmproxy offers Chromium HTTP/2 too.
    result = run_task(
        live_proxy, live_browser, live_recorder, task_id=9001, session="h2",
        agent=lambda page: agents.open_lantern_page(page, live_site.shop_h2),
    )  # fmt: skip
    assert_verdict(result, "success", task_id=9001)
    har = live_proxy.control.get("/sessions/h2/har").json()
    versions = {e["request"]["url"]: e["request"]["httpVersion"] for e in har["log"]["entries"]}
    assert versions[live_site.shop_h2 + "/products/2"].upper() in ("HTTP/2.0", "HTTP/2", "H2")
    api = [e for e in har["log"]["entries"] if e["request"]["url"] == live_site.shop_h2 + "/api/products/2"]
    assert json.loads(api[0]["response"]["content"]["text"])["sku"] == "TL-200"


def test_chromium_that_trusts_only_the_proxy_ca(
    live_proxy: ProxyProcess, live_browser: Browser, live_recorder: FinishRecorder, live_site: RunningSite
) -> None:
    # The other tests ignore certificate errors; here Chromium verifies, with
    # mitmproxy's CA pinned on its command line (the recipe for real agents).
    live_proxy.control.start(9001, "untrusting")
    context = session_context(live_browser, live_proxy, "untrusting", ignore_https_errors=False)
    try:
        with pytest.raises(PlaywrightError, match="ERR_CERT_AUTHORITY_INVALID"):
            context.new_page().goto(live_site.shop_https + "/")
    finally:
        context.close()

    pinned = f"--ignore-certificate-errors-spki-list={ca_spki_pin(live_proxy.confdir)}"
    browser = live_browser.browser_type.launch(executable_path=CHROMIUM, args=[*CHROMIUM_ARGS, pinned])
    try:
        result = run_task(
            live_proxy, browser, live_recorder, task_id=9001, session="pinned",
            agent=lambda page: agents.open_lantern_page(page, live_site.shop_https),
            ignore_https_errors=False,
        )  # fmt: skip
    finally:
        browser.close()
    assert_verdict(result, "success", task_id=9001)


def test_addon_loaded_into_plain_mitmdump(
    live_browser: Browser, live_site: RunningSite, live_recorder: FinishRecorder, tmp_path: Path
) -> None:
    config = write_config(tmp_path / "sites.json", live_site.site_map())
    proxy = start_proxy(
        tmp_path / "mitmdump", tasks=TASKS_FILE, config=config, plain_mitmdump=True,
        extra_options=("ssl_insecure=true",),
    )  # fmt: skip
    try:
        result = run_task(
            proxy, live_browser, live_recorder, task_id=9008, session="plain",
            agent=lambda page: agents.open_forum_post(page, live_site.forum_http),
        )  # fmt: skip
        assert_verdict(result, "success", task_id=9008)
        stopped_short = run_task(
            proxy, live_browser, live_recorder, task_id=9008, session="plain-short",
            agent=lambda page: agents.open_forum_post(page, live_site.forum_http, stop_short=True),
        )  # fmt: skip
        assert_verdict(stopped_short, "failure", task_id=9008)
    finally:
        proxy.stop()
    assert (proxy.output_dir / "9008" / "eval_result.json").exists()


def test_oracle_agrees_with_every_live_finish(
    live_browser: Browser,
    live_recorder: FinishRecorder,
    live_site: RunningSite,
    live_workdir: Path,
    oracle_python: Path,
    official_dataset: Path,
    tmp_path: Path,
) -> None:
    if not live_recorder.finishes:  # this test run on its own
        test_addon_loaded_into_plain_mitmdump(live_browser, live_site, live_recorder, tmp_path)
    assert_oracle_agrees(live_recorder, live_site, live_workdir, oracle_python, official_dataset)
