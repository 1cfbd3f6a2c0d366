"""Pages loaded through the proxy cannot drive the control API.

A real headless Chromium browses, through a real `webarena-live serve`, a product page whose
script attacks the agent's own session: it tries to finish it with a forged answer and to
restart it, by fetch (CORS and no-cors), sendBeacon, an auto-submitted form and an image GET,
both at the reserved control host through the proxy and at the control port on 127.0.0.1.
Nothing may change: the session keeps running, no output is written, the proxy counts the
refusals; then the harness finishes the session for real and gets the reference's verdict.
Run with and without a control token (the page check does not depend on the token).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import requests
from playwright.sync_api import sync_playwright

from tests.site.harness import CHROMIUM, CHROMIUM_ARGS, RESERVED_HOST, ProxyProcess, start_proxy, write_config
from tests.support.addon_helpers import NAVIGATE_TASK, oracle_verdict, write_tasks

VICTIM = "victim"
FORGED = {"task_type": "NAVIGATE", "status": "SUCCESS", "retrieved_data": None}

ATTACK_PAGE = """<!doctype html>
<html><head><title>Blue Mug</title></head><body>
<h1>Blue Mug</h1>
<iframe name="sink" id="sink"></iframe>
<script>
const session = "__SESSION__";
const forged = JSON.stringify(__FORGED__);
const bases = ["http://__RESERVED__", "http://127.0.0.1:__CONTROL__"];
const report = [];
async function attempt(label, action) {
  try { const reply = await action(); report.push([label, reply && reply.type, reply && reply.status]); }
  catch (error) { report.push([label, "blocked", String(error)]); }
}
function image(url) {
  return new Promise(done => {
    const img = new Image(); img.onload = img.onerror = () => done(null); img.src = url;
  });
}
function form(url) {
  // text/plain form encoding makes the body read as JSON: name + "=" + value.
  return new Promise(done => {
    const sink = document.getElementById("sink");
    sink.onload = () => done(null);
    const f = document.createElement("form");
    f.method = "POST"; f.action = url; f.target = "sink"; f.enctype = "text/plain";
    const input = document.createElement("input");
    input.name = forged.slice(0, -1) + ',"x":"'; input.value = '"}';
    f.appendChild(input); document.body.appendChild(f); f.submit();
    setTimeout(() => done(null), 5000);
  });
}
async function attack() {
  for (const base of bases) {
    const finish = base + "/sessions/" + session + "/finish";
    await attempt("fetch cors " + base, () => fetch(finish, {method: "POST", body: forged,
      headers: {"Content-Type": "application/json"}}));
    await attempt("fetch no-cors " + base, () => fetch(finish, {method: "POST", mode: "no-cors",
      body: forged}));
    await attempt("restart " + base, () => fetch(base + "/sessions", {method: "POST", mode: "no-cors",
      body: JSON.stringify({task_id: __OTHER_TASK__, session: session})}));
    await attempt("beacon " + base, async () => ({type: "beacon",
      status: navigator.sendBeacon(finish, forged)}));
    await attempt("image " + base, () => image(finish + "?via=img"));
    await attempt("read trace " + base, () => fetch(base + "/sessions/" + session + "/trace"));
    await attempt("form " + base, () => form(finish));
  }
  await new Promise(done => setTimeout(done, 500));  // let the beacons go out
  window.attackReport = report;
  document.title = "attacked";
}
attack();
</script></body></html>
"""


class Shop(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    page = b""

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        body = self.page if self.path == "/products/7" else b"<html><body>shop</body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def shop() -> Iterator[tuple[str, type[Shop]]]:
    handler = type("AttackShop", (Shop,), {})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", handler
    server.shutdown()


@pytest.mark.parametrize("token", [None, "s3cret-token"], ids=["no-token", "token"])
def test_a_hostile_page_cannot_finish_or_restart_the_session(tmp_path, shop, token, oracle_python):
    base, handler = shop
    tasks = write_tasks(tmp_path)
    config = write_config(tmp_path / "sites.json", {"__SHOPPING__": {"urls": [base]}})
    options = (f"webarena_control_token={token}",) if token else ()
    proxy = start_proxy(tmp_path / "proxy", tasks=tasks, config=config, extra_options=options)
    auth = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        handler.page = (
            ATTACK_PAGE.replace("__SESSION__", VICTIM)
            .replace("__FORGED__", json.dumps(FORGED))
            .replace("__RESERVED__", RESERVED_HOST)
            .replace("__CONTROL__", str(proxy.control_port))
            .replace("__OTHER_TASK__", "9002")
        ).encode()
        control = proxy.control.base
        started = requests.post(
            f"{control}/sessions",
            json={"task_id": NAVIGATE_TASK, "session": VICTIM},
            headers=auth,
            timeout=10,
        )
        assert started.status_code == 200, started.text
        report = browse_attack_page(proxy, f"{base}/products/7")
        assert len(report) == 14, report

        state = requests.get(f"{control}/sessions/{VICTIM}", headers=auth, timeout=10).json()
        assert state["state"] == "running" and state["task_id"] == NAVIGATE_TASK and "result" not in state
        assert not (proxy.output_dir / str(NAVIGATE_TASK)).exists(), "a forged finish wrote outputs"
        health = requests.get(f"{control}/health", timeout=10).json()
        # Every attempt that reached the API was refused as a page's (CORS fetches stop at the preflight).
        assert health["refused_page_requests"] >= 12, (health, report)
        trace = requests.get(f"{control}/sessions/{VICTIM}/trace", headers=auth, timeout=10).json()["events"]
        assert trace[0]["url"] == f"{base}/products/7"
        # The page's requests to the control port went through the proxy like any request: recorded,
        # refused (403), and none of them is a navigation that could change the verdict.
        to_control = [event for event in trace if f":{proxy.control_port}/" in event["url"]]
        assert to_control and all(event["status"] in (0, 403) for event in to_control), to_control

        # The harness, which sends no browser headers, finishes the session for real.
        finish = requests.post(f"{control}/sessions/{VICTIM}/finish", json=FORGED, headers=auth, timeout=30)
        assert finish.status_code == 200 and finish.json()["status"] == "success", finish.text
        task_dir = proxy.output_dir / str(NAVIGATE_TASK)
        assert oracle_verdict(oracle_python, tasks, NAVIGATE_TASK, task_dir, base) == {
            "status": "success",
            "score": 1.0,
        }
        if token:  # and without the token, even a harness-like client changes nothing
            again = requests.post(
                f"{control}/sessions", json={"task_id": 9002, "session": VICTIM}, timeout=10
            )
            assert again.status_code == 401
    finally:
        proxy.stop()


def browse_attack_page(proxy: ProxyProcess, url: str) -> list[Any]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=list(CHROMIUM_ARGS))
        try:
            context = browser.new_context(
                proxy={"server": proxy.session_proxy_url, "username": VICTIM, "password": "x"}
            )
            page = context.new_page()
            page.goto(url)
            page.wait_for_function("document.title === 'attacked'", timeout=60_000)
            report: list[Any] = page.evaluate("window.attackReport")
            context.close()
            return report
        finally:
            browser.close()


def test_the_control_port_binds_to_loopback_by_default(tmp_path):
    tasks = write_tasks(tmp_path)
    config = write_config(tmp_path / "sites.json", {"__SHOPPING__": {"urls": ["http://shop.test"]}})
    proxy = start_proxy(tmp_path / "proxy", tasks=tasks, config=config)
    try:
        listening = Path(f"/proc/{proxy.process.pid}/net/tcp").read_text().splitlines()[1:]
        port_hex = f"{proxy.control_port:04X}"
        local = [
            fields[1]
            for fields in (line.split() for line in listening)
            if fields[1].endswith(f":{port_hex}") and fields[3] == "0A"  # 0A: LISTEN
        ]
        assert local == [f"0100007F:{port_hex}"], local  # 127.0.0.1 only, not 0.0.0.0
    finally:
        proxy.stop()
