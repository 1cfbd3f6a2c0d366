"""`webarena-live serve --web`: mitmweb shows each captured flow with its session, event type and,
once known, the network evaluator it satisfies — read back from mitmweb's own JSON API.

mitmproxy 11.0's web UI has no password or token; 11.1 and later ask for one (`serve --web` sets
it and its banner names the address with it: `?token=...`). It listens on 127.0.0.1 only, which
`serve --web` enforces.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from tests.support.serve_process import shop, start_serve
from webarena_live.client import proxy_url
from webarena_live.commands.cli import build_parser
from webarena_live.commands.serve import addon_options
from webarena_live.launch import free_ports
from webarena_live.proxy.addon import WebArenaLive

__all__ = ["shop"]

STAR = "⭐"  # mitmweb's rendering of the ":star:" mark


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, shop: str) -> Iterator[tuple[str, str, str]]:
    workdir = tmp_path_factory.mktemp("web")
    (web_port,) = free_ports(1)
    process, control, proxy = start_serve(
        workdir, shop, workdir / "state", "--web", "--web-port", str(web_port)
    )
    deadline = time.monotonic() + 30
    while not (address := re.search(rf"mitmweb +(http://127\.0\.0\.1:{web_port}/\S*)", process.log_tail())):
        assert time.monotonic() < deadline, "the banner names mitmweb's address"
        time.sleep(0.1)
    yield control, proxy.rsplit(":", 1)[1], address[1]
    process.stop()


def web_api(web: str, path: str) -> str:
    """`path` of mitmweb's API, with the banner's token (if mitmweb asks for one)."""
    base, _, token = web.partition("?")
    return f"{base}{path}" + (f"?{token}" if token else "")


def browse(port: str, session: str, urls: list[str]) -> None:
    with requests.Session() as agent:
        through = proxy_url(session, port=int(port))
        agent.proxies = {"http": through, "https": through}
        for url in urls:
            assert agent.get(url, headers={"Accept": "text/html"}).ok


def flows_of(web: str, session: str, settle: float = 0.5) -> list[dict[str, Any]]:
    time.sleep(settle)  # progress is checked 100 ms after an event
    answer = requests.get(web_api(web, "flows"), timeout=5)
    assert answer.ok, answer.text
    return [f for f in answer.json() if f["comment"].startswith(f"session {session} ·")]


def test_flows_carry_session_event_type_and_the_satisfied_evaluator(
    served: tuple[str, str, str], shop: str
) -> None:
    control, port, web = served
    requests.post(f"{control}/sessions", json={"task_id": 1007, "session": "agent-7"}).raise_for_status()
    sorted_search = f"{shop}/catalogsearch/result/?q=backpack&product_list_order=price&product_list_dir=desc"
    browse(port, "agent-7", [f"{shop}/", f"{shop}/catalogsearch/result/?q=backpack"])
    flows = flows_of(web, "agent-7")
    assert [(f["comment"], f["marked"]) for f in flows] == [("session agent-7 · navigation", "")] * 2

    browse(port, "agent-7", [sorted_search])
    flows = flows_of(web, "agent-7")
    print("\n" + "\n".join(f"{f['request']['path']}: {f['comment']!r} {f['marked']}" for f in flows))
    assert [(f["comment"], f["marked"]) for f in flows] == [
        ("session agent-7 · navigation", ""),
        ("session agent-7 · navigation", ""),
        ("session agent-7 · navigation · satisfies NetworkEventEvaluator #1", STAR),
    ]
    assert flows[2]["request"]["path"] == sorted_search.removeprefix(shop)


def test_a_verdict_that_changes_moves_the_mark(served: tuple[str, str, str], shop: str) -> None:
    """Task 1003 judges the last navigation only: leaving the mug's page takes the mark off it."""
    control, port, web = served
    requests.post(f"{control}/sessions", json={"task_id": 1003, "session": "mugs"}).raise_for_status()
    browse(port, "mugs", [f"{shop}/enamel-camp-mug.html"])
    assert [(f["comment"], f["marked"]) for f in flows_of(web, "mugs")] == [
        ("session mugs · navigation · satisfies NetworkEventEvaluator #1", STAR)
    ]
    browse(port, "mugs", [f"{shop}/"])
    assert [(f["comment"], f["marked"]) for f in flows_of(web, "mugs")] == [
        ("session mugs · navigation", "")
    ] * 2


def test_plain_serve_does_not_annotate() -> None:
    plain = build_parser().parse_args(["serve"])
    assert addon_options(plain)["webarena_annotate_flows"] is False and plain.web is False
    web = build_parser().parse_args(["serve", "--web"])
    assert addon_options(web)["webarena_annotate_flows"] is True and web.web_port == 8083
    assert WebArenaLive().flow_notes is None  # the capture path skips annotation until configured on


def test_the_list_shows_comments_no_challenges_and_the_real_port(
    served: tuple[str, str, str], shop: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """What a person sees in mitmweb (a real Chromium on its UI): the comment column, no 407 challenge
    in the list although a browser's first request got one, and the proxy's own port in the status bar."""
    import os
    from pathlib import Path

    from playwright.sync_api import sync_playwright

    control, port, web = served
    requests.post(f"{control}/sessions", json={"task_id": 1003, "session": "shy"}).raise_for_status()
    session_port = requests.get(f"{control}/health", timeout=5).json()["session_port"]
    challenged = requests.get(f"{shop}/", proxies={"http": f"http://127.0.0.1:{session_port}"}, timeout=5)
    assert challenged.status_code == 407  # as a browser's first request on the session port
    answered = requests.get(
        f"{shop}/",
        proxies={"http": f"http://shy:x@127.0.0.1:{session_port}"},
        headers={"Accept": "text/html"},
    )
    assert answered.ok
    time.sleep(0.5)
    listed = requests.get(web_api(web, "flows"), timeout=5).json()
    assert listed and not [f for f in listed if (f.get("response") or {}).get("status_code") == 407]
    assert [f["comment"] for f in listed if f["comment"].startswith("session shy")] == [
        "session shy · navigation"
    ]

    shots = Path(os.environ.get("WEBARENA_TEST_ARTIFACTS") or tmp_path_factory.mktemp("mitmweb-shots"))
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 700})
            page.goto(web)
            page.wait_for_selector("text=session shy · navigation", timeout=15_000)
            headers = page.locator(".flow-table thead th").all_inner_texts()
            address = page.locator('footer [title="HTTP Proxy Server Address"]').inner_text()
            page.screenshot(path=str(shots / "mitmweb-list.png"))
        finally:
            browser.close()
    assert any("Comment" in header for header in headers), headers
    assert address.replace(" ", "") == f"127.0.0.1:{port}", address
