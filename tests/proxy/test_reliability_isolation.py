"""Isolation under load. 24 sessions (proxy-credential usernames) run at once
through one real `webarena-live serve`, over the proxy port, the session port and HTTPS tunnels,
with their requests interleaved; every session's trace (and journal) must hold exactly the
requests its client sent, in the order sent, none lost and none from another session.
"""

from __future__ import annotations

import json
import ssl
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import requests

from tests.site.certs import make_self_signed
from tests.site.harness import ProxyProcess, start_proxy, write_config
from tests.support.addon_helpers import MUTATE_TASK, write_tasks
from webarena_live.evaluator.har import load_trace
from webarena_live.runs.recovery import find_journal

SESSIONS = 24
REQUESTS_PER_SESSION = 30


class Echo(BaseHTTPRequestHandler):
    """Answers every request with a small JSON echo, keep-alive, like a busy API."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        data = json.dumps({"path": self.path, "received": len(body)}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = _answer


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    plain = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    secure = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    files = make_self_signed(tmp_path_factory.mktemp("echo-tls"))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(files.cert, files.key)
    secure.socket = context.wrap_socket(secure.socket, server_side=True, do_handshake_on_connect=False)
    for server in (plain, secure):
        threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{plain.server_address[1]}", f"https://127.0.0.1:{secure.server_address[1]}"
    for server in (plain, secure):
        server.shutdown()


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory, upstream: tuple[str, str]) -> Iterator[ProxyProcess]:
    workdir = tmp_path_factory.mktemp("isolation")
    config = write_config(workdir / "sites.json", {"__SHOPPING__": {"urls": [upstream[0]]}})
    running = start_proxy(
        workdir / "proxy", tasks=write_tasks(workdir), config=config, extra_options=("ssl_insecure=true",)
    )
    yield running
    running.stop()


def run_agent(
    proxy: ProxyProcess, name: str, index: int, base: str, barrier: threading.Barrier
) -> list[tuple]:
    """One agent's traffic; returns (method, url) of every request it sent, in order."""
    port = proxy.session_port if index % 4 == 1 else proxy.port
    client = requests.Session()
    client.trust_env = False
    client.proxies = {scheme: f"http://{name}:pw@127.0.0.1:{port}" for scheme in ("http", "https")}
    ca = str(proxy.output_dir.parent / "mitmproxy" / "mitmproxy-ca-cert.pem")  # trust the proxy's own CA
    sent = []
    barrier.wait(timeout=60)  # everyone starts together, so the requests really interleave
    for number in range(REQUESTS_PER_SESSION):
        url = f"{base}/{name}/step/{number}?q={number}"
        if number % 3 == 0:
            reply = client.get(url, headers={"Accept": "text/html"}, timeout=30, verify=ca)
            sent.append(("GET", url))
        elif number % 3 == 1:
            reply = client.post(url, data={"agent": name, "step": str(number)}, timeout=30, verify=ca)
            sent.append(("POST", url))
        else:
            reply = client.put(url, json={"agent": name, "step": number}, timeout=30, verify=ca)
            sent.append(("PUT", url))
        assert reply.status_code == 200 and reply.json()["path"].startswith(f"/{name}/"), reply.text
    client.close()
    return sent


def test_concurrent_sessions_each_get_exactly_their_own_events_in_order(proxy, upstream):
    names = [f"agent-{index:02d}" for index in range(SESSIONS)]
    for name in names:
        assert proxy.control.post("/sessions", {"task_id": MUTATE_TASK, "session": name}).status_code == 200
    barrier = threading.Barrier(SESSIONS)
    with ThreadPoolExecutor(SESSIONS) as pool:
        futures = {
            name: pool.submit(run_agent, proxy, name, index, upstream[index % 4 == 3], barrier)
            for index, name in enumerate(names)
        }
        sent = {name: future.result(timeout=300) for name, future in futures.items()}
    total = 0
    for name in names:
        events = proxy.control.trace(name)
        got = [(event["method"], event["url"]) for event in events]
        assert got == sent[name], f"{name}: {len(got)} events vs {len(sent[name])} sent"
        assert all(event["session"] == name and event["status"] == 200 for event in events)
        total += len(got)
    assert total == SESSIONS * REQUESTS_PER_SESSION
    # Nothing leaked into a session nobody named.
    listed = {view["session"]: view for view in proxy.control.get("/sessions").json()["sessions"]}
    assert set(listed) == set(names)
    # The journals (what survives a crash) hold the same events in the same order.
    journal_dir = Path(proxy.output_dir) / ".journal"
    for name in names:
        journaled = load_trace(find_journal(journal_dir, name, MUTATE_TASK))
        assert [(event.method, event.url) for event in journaled] == sent[name]


def test_concurrent_finishes_judge_each_session_on_its_own_trace(proxy, upstream):
    """Finishing every session at once: each verdict is judged on that session's trace, and the
    outputs they all write to the same task directory are always one whole session's files."""
    names = [f"agent-{index:02d}" for index in range(SESSIONS)]
    answer = {"task_type": "MUTATE", "status": "SUCCESS", "retrieved_data": None}
    with ThreadPoolExecutor(8) as pool:
        replies = list(pool.map(lambda name: proxy.control.post(f"/sessions/{name}/finish", answer), names))
    assert [reply.status_code for reply in replies] == [200] * SESSIONS
    assert all(reply.json()["status"] == "failure" for reply in replies)  # nobody added A7 to the cart
    for name in names:
        state = proxy.control.get(f"/sessions/{name}").json()
        assert state["state"] == "finished" and state["counts"]["total"] == REQUESTS_PER_SESSION
    task_dir = Path(proxy.output_dir) / str(MUTATE_TASK)
    owners = {
        entry["request"]["url"].split("/")[3]
        for entry in json.loads((task_dir / "network.har").read_text())["log"]["entries"]
    }
    assert len(owners) == 1 and owners <= set(names)  # one whole session's HAR, not a mix
    assert not list(task_dir.glob(".*.tmp"))
