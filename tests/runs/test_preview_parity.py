"""A preview followed by a finish with the same body gives the same verdict — on a sample of
the conformance corpus replayed through a real `webarena-live serve`, whose finish must also give the
reference's stored verdict for each case (or a documented divergence from it).

Each case's HAR entries are sent through the proxy's port, one request at a time, in the session of the
case; every official site is mapped to a local upstream that answers each request with what the entry
recorded (status, headers, cookies, body). The generated traces name sites at unresolvable `*.test`
origins, so the replay rewrites each origin to its upstream's — in the entries and in the answer alike,
which keeps every comparison the same (the proxy's site map names the upstreams).
"""

from __future__ import annotations

import base64
import http.client
import json
import socket
import threading
from collections import deque
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests

from scripts.support.conformance import golden as g
from scripts.support.conformance import suite
from scripts.support.conformance.oracle_env import official_dataset
from scripts.support.conformance.runs import Verdict
from tests.support import quick
from tests.support.serve_process import start_serve

SAMPLE_PER_GROUP = 4 if not quick.running() else 1
"""Cases per conformance group (11 groups): ~40, spread over each group's tasks (one each in a quick run,
tests/support/quick.py)."""

# What the trace cannot carry live: no HAR to replay, or no request body a finish could take.
NOT_REPLAYABLE = {"har_not_json", "har_without_entries", "har_without_log", "empty_response_file"}
SKIPPED_HEADERS = {"host", "content-length", "connection", "transfer-encoding", "proxy-authorization"}
SKIPPED_RESPONSE_HEADERS = {"content-length", "transfer-encoding", "connection", "content-encoding"}


class Upstream(BaseHTTPRequestHandler):
    """Answers each request with the next recorded response: the replay sends one request at a time."""

    protocol_version = "HTTP/1.1"
    answers: deque[dict[str, Any]] = deque()

    def handle_one_request(self) -> None:
        self.raw_requestline = self.rfile.readline(65537)
        if not self.raw_requestline or not self.parse_request():
            self.close_connection = True
            return
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        response = self.answers.popleft()
        content = response.get("content") or {}
        text = content.get("text") or ""
        body = base64.b64decode(text) if content.get("encoding") == "base64" else text.encode()
        if self.command == "HEAD" or response["status"] in (204, 304):
            body = b""
        self.send_response_only(response["status"], response.get("statusText") or None)
        cookies = response.get("cookies") or []
        for header in response["headers"]:
            name = header["name"].lower()
            if name in SKIPPED_RESPONSE_HEADERS or (name == "set-cookie" and cookies):
                continue
            self.send_header(header["name"], header["value"])
        for cookie in cookies:
            self.send_header("Set-Cookie", f"{cookie['name']}={cookie['value']}; path=/")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def upstreams() -> Iterator[dict[str, str]]:
    """Original origin (`shop.test:7770`) -> the local upstream's (`127.0.0.1:port`)."""
    origins = sorted({urlsplit(url).netloc for url in g.SITE_URLS.values()})
    servers = [ThreadingHTTPServer(("127.0.0.1", 0), Upstream) for _ in origins]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    yield {
        origin: f"127.0.0.1:{server.server_address[1]}"
        for origin, server in zip(origins, servers, strict=True)
    }
    for server in servers:
        server.shutdown()


def rewrite(text: str, origins: dict[str, str]) -> str:
    for original, local in origins.items():
        text = text.replace(original, local).replace(original.replace(":", "%3A"), local.replace(":", "%3A"))
    return text


def sample(generated: suite.Generated) -> list[str]:
    """A few cases of every group, spread over its tasks (deterministic), that a proxy can replay."""
    chosen = []
    for group in suite.mutations.GROUPS:
        ids = sorted(
            (c for c in generated.runs if c.startswith(group + "/")), key=lambda c: int(c.split("/")[1])
        )
        ids = [c for c in ids if generated.kinds[c] not in NOT_REPLAYABLE and generated.stored.get(c)]
        step = max(1, len(ids) // SAMPLE_PER_GROUP)
        chosen += ids[step // 2 :: step][:SAMPLE_PER_GROUP]
    return chosen


def finish_body(text: str) -> bytes:
    """The answer file as a finish body: its JSON as is; free text (the reference reads it as text)
    as a JSON string, how an agent sends a text answer live."""
    try:
        json.loads(text)
    except ValueError:
        return json.dumps(text).encode()
    return text.encode()


def send(proxy_port: int, session: str, entry: dict[str, Any]) -> None:
    """One recorded request through the proxy (absolute form), with its recorded headers and body."""
    request = entry["request"]
    url = request["url"]
    body = ((request.get("postData") or {}).get("text") or "").encode()
    credentials = base64.b64encode(f"{session}:x".encode()).decode()
    lines = [f"{request['method']} {url} HTTP/1.1", f"Host: {urlsplit(url).netloc}"]
    lines += [
        f"{h['name']}: {h['value']}" for h in request["headers"] if h["name"].lower() not in SKIPPED_HEADERS
    ]
    lines += [f"Proxy-Authorization: Basic {credentials}", f"Content-Length: {len(body)}"]
    with socket.create_connection(("127.0.0.1", proxy_port), timeout=30) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        answer = http.client.HTTPResponse(sock, method=request["method"])
        answer.begin()
        answer.read()
    assert answer.status == entry["response"]["status"], f"{url}: {answer.status}"


def test_preview_equals_finish_on_replayed_conformance_cases(
    tmp_path: Path, oracle_python: Path, upstreams: dict[str, str]
) -> None:
    dataset = official_dataset(oracle_python)
    try:
        generated = suite.prepare(dataset, oracle_python, tmp_path / "corpus")
    except suite.StaleVerdicts as stale:
        pytest.fail(str(stale))
    cases = sample(generated)
    assert len(cases) >= 9 * SAMPLE_PER_GROUP, cases
    config = json.loads(rewrite(json.dumps(g.site_config()), {o: upstreams[o] for o in upstreams}))
    (tmp_path / "sites.json").write_text(json.dumps(config))
    process, control, proxy = start_serve(
        tmp_path, "http://unused.test", tmp_path / "state",
        "--config", str(tmp_path / "sites.json"), "--tasks", str(dataset),
    )  # fmt: skip
    live: dict[str, Verdict | None] = {}
    try:
        for case_id in cases:
            run = generated.runs[case_id]
            task_id = int(run.name)
            session = case_id.replace("/", "-")
            entries = json.loads(rewrite((run / "network.har").read_text(), upstreams))["log"]["entries"]
            answer = finish_body(rewrite((run / "agent_response.json").read_text(), upstreams))
            started = requests.post(f"{control}/sessions", json={"task_id": task_id, "session": session})
            assert started.ok, started.text
            Upstream.answers.extend(entry["response"] for entry in entries)
            for entry in entries:
                send(int(proxy.rsplit(":", 1)[1]), session, entry)
            assert not Upstream.answers, f"{case_id}: {len(Upstream.answers)} requests never reached upstream"
            progress = requests.get(f"{control}/sessions/{session}/progress")
            assert progress.ok and progress.json()["events"] == len(entries), progress.text
            headers = {"Content-Type": "application/json"}
            preview = requests.post(f"{control}/sessions/{session}/preview", data=answer, headers=headers)
            finish = requests.post(f"{control}/sessions/{session}/finish", data=answer, headers=headers)
            assert preview.status_code == finish.status_code == 200, (case_id, preview.text, finish.text)
            for answered in (progress, preview):  # the proxy's own share of the answer, as the finish's
                assert answered.headers["Server-Timing"].startswith("total;dur=")
            previewed, result = preview.json(), finish.json()
            assert previewed.pop("preview") is True
            assert previewed == result, case_id
            live[case_id] = Verdict(result["status"], float(result["score"]))
    finally:
        process.stop()
    report = suite.compare({c: generated.kinds[c] for c in cases}, generated.stored, live)
    assert not report.unknown, "\n".join(d.describe() for d in report.unknown)
    groups = {c.split("/")[0] for c in cases}
    assert groups == set(suite.mutations.GROUPS), groups
    print(f"preview == finish on {len(cases)} replayed cases; {report.agreed} verdicts as stored, "
          f"{len(report.known)} documented divergences")  # fmt: skip
