"""`webarena-live serve` end to end, without a browser: the real CLI in a subprocess, a real upstream
site on 127.0.0.1 (HTTP and HTTPS), `requests` as the agent, the oracle judging the written outputs."""

from __future__ import annotations

import ipaddress
import json
import re
import signal
import socket
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import requests
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from mitmproxy.certs import CertStore

from tests.support.addon_helpers import MUTATE_TASK, NAVIGATE_TASK, oracle_verdict, write_config, write_tasks
from tests.support.serve_process import finish, start_serve
from webarena_live.launch import Ports, ServeProcess, free_ports

CLI = Path(sys.executable).parent / "webarena-live"


class Shop(BaseHTTPRequestHandler):
    """A tiny shop: pages, a form that redirects, a JSON API."""

    def log_message(self, *args: object) -> None:  # keep test output clean
        pass

    def _send(self, status: int, body: bytes, content_type: str, extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path == "/api/big":
            self._send(200, json.dumps({"rows": ["x" * 100] * 1000}).encode(), "application/json")
        elif self.path.startswith("/api/"):
            self._send(200, json.dumps({"cart": {"items": 2}}).encode(), "application/json")
        else:
            page = f"<html><body>page {self.path}</body></html>".encode()
            self._send(200, page, "text/html; charset=utf-8")

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self._send(302, b"", "text/html", {"Location": "/cart", "Set-Cookie": "cart=A7; Path=/"})


def start_server(server: ThreadingHTTPServer) -> None:
    threading.Thread(target=server.serve_forever, daemon=True).start()


@pytest.fixture(scope="module")
def shop() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Shop)
    start_server(server)
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture(scope="module")
def shop_tls(tmp_path_factory) -> Iterator[str]:
    """The same shop over HTTPS, with a certificate from a throwaway CA (the proxy runs with ssl_insecure)."""
    directory = tmp_path_factory.mktemp("upstream-ca")
    store = CertStore.from_store(directory, "upstream", 2048)
    entry = store.get_cert("127.0.0.1", [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    cert_file, key_file = directory / "cert.pem", directory / "key.pem"
    cert_file.write_bytes(entry.cert.to_pem())
    key_file.write_bytes(
        entry.privatekey.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    server = ThreadingHTTPServer(("127.0.0.1", 0), Shop)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key_file)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    start_server(server)
    yield f"https://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


class Proxy(ServeProcess):
    confdir: Path
    out: Path
    tasks: Path

    @property
    def control(self) -> str:
        return self.control_url

    def proxies(self, user: str | None = None, *, session_port: bool = False) -> dict[str, str]:
        port = self.ports.session if session_port else self.ports.proxy
        credentials = f"{user}:pw@" if user else ""
        url = f"http://{credentials}127.0.0.1:{port}"
        return {"http": url, "https": url}

    @property
    def ca(self) -> str:
        return str(self.confdir / "mitmproxy-ca-cert.pem")


@pytest.fixture(scope="module")
def proxy(tmp_path_factory, shop) -> Iterator[Proxy]:
    directory = tmp_path_factory.mktemp("serve")
    confdir = directory / "mitmproxy"
    tasks, config = write_tasks(directory), write_config(directory, shop)
    running = Proxy(
        "--tasks", str(tasks), "--config", str(config), "--output-dir", str(directory / "out"),
        "--set", f"confdir={confdir}", "--set", "ssl_insecure=true", "--set", "stream_large_bodies=20k",
    )  # fmt: skip
    running.confdir, running.out, running.tasks = confdir, directory / "out", directory / "tasks.json"
    with running:
        yield running


def start(proxy: Proxy, task_id: int, session: str) -> dict:
    body = {"task_id": task_id, "session": session}
    reply = requests.post(f"{proxy.control}/sessions", json=body, timeout=5)
    assert reply.status_code == 200, reply.text
    return reply.json()


def test_health_and_banner(proxy):
    health = requests.get(f"{proxy.control}/health", timeout=5).json()
    assert health["status"] == "ok" and health["tasks"] == 3 and health["control_port"] == proxy.ports.control


def test_mutate_run_with_credentials_up_front_matches_the_oracle(proxy, shop, oracle_python):
    view = start(proxy, MUTATE_TASK, "alice")
    assert view["start_urls"] == [f"{shop}/"]
    agent = requests.Session()
    agent.proxies = proxy.proxies("alice")
    agent.headers["Accept"] = "text/html"
    assert agent.get(f"{shop}/", timeout=5).ok
    done = agent.post(f"{shop}/cart/add", data={"sku": "A7", "qty": "2"}, timeout=5)
    assert done.ok and done.url == f"{shop}/cart"  # followed the 302
    # Finish through the proxy, at the reserved host, with the seed's field names.
    answer = {"action": "mutate", "status": "SUCCESS", "results": None}
    reply = agent.post("http://webarena-live.invalid/sessions/alice/finish", json=answer, timeout=30)
    assert reply.status_code == 200, reply.text
    result = reply.json()
    assert result["status"] == "success", result
    trace = requests.get(f"{proxy.control}/sessions/alice/trace", timeout=5).json()
    assert [(e["method"], e["url"], e["status"]) for e in trace["events"]] == [
        ("GET", f"{shop}/", 200), ("POST", f"{shop}/cart/add", 302), ("GET", f"{shop}/cart", 200)
    ]  # fmt: skip
    task_dir = proxy.out / str(MUTATE_TASK)
    assert json.loads((task_dir / "eval_result.json").read_text()) == {
        k: v
        for k, v in result.items()
        if k not in ("interference", "sites_answered", "unanswered", "site_errors")
    }
    # Live files (the network.har from the spool included) are shared like offline ones: 0644.
    assert {p.name: p.stat().st_mode & 0o777 for p in task_dir.iterdir()} == dict.fromkeys(
        ("attempt.json", "agent_response.json", "network.har", "eval_result.json"), 0o644
    )
    verdict = oracle_verdict(oracle_python, proxy.tasks, MUTATE_TASK, task_dir, shop)
    assert verdict == {"status": "success", "score": 1.0}


def test_default_session_and_the_event_stream(proxy, shop):
    start(proxy, NAVIGATE_TASK, "default")
    stream = requests.get(f"{proxy.control}/sessions/default/events", stream=True, timeout=10)
    assert stream.headers["Content-Type"] == "text/event-stream"
    lines = stream.iter_lines(decode_unicode=True)
    assert next(lines) == "retry: 1000"
    seen: list[dict] = []

    def browse() -> None:
        # No credentials on the proxy port: the session named "default".
        page = f"{shop}/products/7"
        requests.get(page, proxies=proxy.proxies(), headers={"Accept": "text/html"}, timeout=5)

    threading.Thread(target=browse).start()
    for line in lines:  # the event arrives while the session is still running
        if line.startswith("data: ") and '"index"' in line:
            seen.append(json.loads(line[6:]))
            break
    assert seen[0]["url"] == f"{shop}/products/7" and seen[0]["type"] == "navigation"
    finished = finish(proxy.control, "default", {"task_type": "NAVIGATE", "status": "SUCCESS"})
    assert finished.json()["status"] == "success"
    tail = [line for line in lines]
    assert "event: finished" in tail  # the stream ends with the verdict
    stream.close()


def test_session_port_challenges_then_accepts_credentials(proxy, shop):
    refused = requests.get(f"{shop}/x", proxies=proxy.proxies(session_port=True), timeout=5)
    assert refused.status_code == 407
    assert refused.headers["Proxy-Authenticate"].startswith("Basic")
    accepted = requests.get(f"{shop}/x", proxies=proxy.proxies("carol", session_port=True), timeout=5)
    assert accepted.status_code == 200
    state = requests.get(f"{proxy.control}/sessions/carol", timeout=5).json()
    assert state["state"] == "idle" and state["counts"]["total"] == 1


def test_https_credentials_on_connect_stick_to_the_tunnel(proxy, shop_tls):
    agent = requests.Session()
    agent.proxies = proxy.proxies("dana", session_port=True)
    agent.trust_env = False  # REQUESTS_CA_BUNDLE in the environment would override our CA
    for path in ("/p/1", "/api/cart", "/p/2"):
        # Trusting the proxy's own CA, which it created in its confdir.
        assert agent.get(f"{shop_tls}{path}", timeout=10, verify=proxy.ca).ok
    trace = requests.get(f"{proxy.control}/sessions/dana/trace", timeout=5).json()
    urls = [f"{shop_tls}/p/1", f"{shop_tls}/api/cart", f"{shop_tls}/p/2"]
    assert [e["url"] for e in trace["events"]] == urls
    har = requests.get(f"{proxy.control}/sessions/dana/har", timeout=5).json()
    content = har["log"]["entries"][1]["response"]["content"]
    assert json.loads(content["text"]) == {"cart": {"items": 2}}  # JSON bodies are kept for evaluation


def test_large_bodies_stream_through_and_are_not_kept(proxy, shop):
    got = requests.get(f"{shop}/api/big", proxies=proxy.proxies("erin"), timeout=10)
    assert got.ok and len(got.json()["rows"]) == 1000  # streamed through intact
    small = requests.get(f"{shop}/api/cart", proxies=proxy.proxies("erin"), timeout=10)
    assert small.ok
    entries = requests.get(f"{proxy.control}/sessions/erin/har", timeout=5).json()["log"]["entries"]
    texts = [entry["response"]["content"].get("text") for entry in entries]
    assert not texts[0]  # the streamed body was never buffered, so it is not in the event
    assert json.loads(texts[1]) == {"cart": {"items": 2}}


def test_errors_are_json(proxy):
    reply = requests.post(f"{proxy.control}/sessions", data=b"{nope", timeout=5)
    assert reply.status_code == 400 and reply.json()["error"] == "bad_json"
    assert requests.get(f"{proxy.control}/sessions/nobody", timeout=5).status_code == 404


def test_journal_and_clean_shutdown(proxy):
    journals = list((proxy.out / ".journal").glob("*.jsonl"))
    assert journals, "every session run with traffic has a journal"
    assert proxy.process is not None
    proxy.process.send_signal(signal.SIGTERM)
    assert proxy.process.wait(timeout=20) == 0
    out = proxy.log_tail(1_000_000)
    assert "control API" in out and "session port" in out
    # One log line per session start, finish and refused request (mitmproxy's log, info level).
    assert f"session alice started: task {MUTATE_TASK}" in out
    assert re.search(rf"session alice finished: task {MUTATE_TASK} success, score 1, \d+ events", out), out


def test_stopping_with_keep_alive_clients_connected_prints_no_traceback(tmp_path, shop):
    """Ctrl-C while a client keeps its connections open (to the proxy and to the control port): exit 0,
    and no cancelled connection is reported as an error (plain mitmdump prints a traceback for each)."""
    process, control, proxy_url = start_serve(tmp_path, shop, tmp_path / "state")
    reserved = "http://webarena-live.invalid"  # answers HTTP/1.1 and keeps the connection, as browsers do
    held = []
    for url, request in (
        (proxy_url, f"GET {reserved}/health HTTP/1.1\r\nHost: webarena-live.invalid\r\n\r\n"),
        (control, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"),
    ):
        connection = socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), timeout=10)
        connection.sendall(request.encode())
        assert connection.recv(12) == b"HTTP/1.1 200"
        held.append(connection)
    out = process.stop()
    for connection in held:
        connection.close()
    assert process.process is not None and process.process.returncode == 0, out
    assert "Traceback" not in out and "CancelledError" not in out, out


def test_loads_into_plain_mitmdump(tmp_path, shop):
    """The documented `mitmdump -s "$(webarena-live addon-path)" --set webarena_...` way, with both modes."""
    entry = subprocess.run(
        [str(CLI), "addon-path"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert entry.endswith("webarena_live/entry.py") or entry.endswith("addon/entry.py"), entry
    ports = Ports(*free_ports(3))
    mitmdump = ServeProcess(
        "-q", "-s", str(entry), "--mode", f"regular@{ports.proxy}", "--mode", f"regular@{ports.session}",
        "--set", f"webarena_session_port={ports.session}", "--set", f"webarena_control_port={ports.control}",
        "--set", f"webarena_tasks={write_tasks(tmp_path)}",
        "--set", f"webarena_config={write_config(tmp_path, shop)}", "--set", f"confdir={tmp_path / 'conf'}",
        ports=ports, command=[str(CLI.parent / "mitmdump")],
    )  # fmt: skip
    with mitmdump:
        proxies = {"http": mitmdump.session_proxy_url}
        assert requests.get(f"{shop}/a", proxies=proxies, timeout=5).status_code == 407
        proxies = {"http": f"http://fay:pw@127.0.0.1:{ports.session}"}
        assert requests.get(f"{shop}/a", proxies=proxies, timeout=5).ok
        assert mitmdump.client.session("fay")["counts"]["total"] == 1
    output = mitmdump.log_tail(1_000_000)
    assert "deprecated" not in output, output


def test_entry_script_holds_only_the_addon():
    """The script module names no mitmproxy hook itself (mitmproxy warns on `add_log`, deprecated)."""
    from mitmproxy import hooks
    from mitmproxy.addons import script

    from webarena_live.commands.cli import addon_path
    from webarena_live.proxy.addon import WebArenaLive

    module = script.load_script(addon_path())
    assert module is not None
    assert not set(vars(module)) & set(hooks.all_hooks)
    (live,) = module.addons
    assert isinstance(live, WebArenaLive)
