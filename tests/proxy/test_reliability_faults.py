"""Upstream faults are recorded, not fatal; odd request bodies never break capture.

A real `webarena-live serve` (verifying upstream certificates, as by default)
in front of real misbehaving servers on 127.0.0.1 (tests/support/faulty_upstream.py).
Each fault runs in a session of its own; its trace must hold exactly one
event with the status a HAR shows (0 when no complete response arrived, with
the reason in `error`), and the proxy must go on serving ordinary traffic.
"""

from __future__ import annotations

import gzip
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.site.harness import ProxyProcess, start_proxy, write_config
from tests.support.addon_helpers import MUTATE_TASK, NAVIGATE_TASK, oracle_verdict, write_tasks
from tests.support.faulty_upstream import FaultyUpstream, run_faulty_upstream
from webarena_live.evaluator.har import load_trace
from webarena_live.runs.recovery import find_journal

CLIENT_TIMEOUT = 2.0


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultyUpstream]:
    with run_faulty_upstream(tmp_path_factory.mktemp("faulty")) as running:
        yield running


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory, upstream: FaultyUpstream) -> Iterator[ProxyProcess]:
    workdir = tmp_path_factory.mktemp("fault-proxy")
    # The closed port is a site too: failed tunnels are events only for the task sites.
    sites = {
        "__SHOPPING__": {"urls": [upstream.http_base]},
        "__REDDIT__": {"urls": [f"https://127.0.0.1:{upstream.closed_port}"]},
    }
    config = write_config(workdir / "sites.json", sites)
    running = start_proxy(workdir / "proxy", tasks=write_tasks(workdir), config=config)
    yield running
    running.stop()


def through(proxy: ProxyProcess, session: str) -> requests.Session:
    client = requests.Session()
    url = f"http://{session}:x@127.0.0.1:{proxy.port}"
    client.proxies = {"http": url, "https": url}
    client.trust_env = False
    return client


def send(proxy: ProxyProcess, session: str, method: str, url: str, **kwargs: Any) -> str:
    """Send one request through the proxy; what the client saw (a status or the exception name)."""
    try:
        reply = through(proxy, session).request(
            method, url, timeout=CLIENT_TIMEOUT, verify=proxy_ca(proxy), **kwargs
        )
        return str(reply.status_code)
    except requests.RequestException as error:
        return type(error).__name__


def proxy_ca(proxy: ProxyProcess) -> str:
    """The CA mitmproxy made in its confdir: clients trust the proxy, the proxy judges upstream."""
    return str(proxy.output_dir.parent / "mitmproxy" / "mitmproxy-ca-cert.pem")


def events_of(proxy: ProxyProcess, session: str, count: int = 1) -> list[dict[str, Any]]:
    """The session's events, waiting (bounded) until `count` are in: a failed flow is recorded when
    mitmproxy gives up on it, which can be just after the client did."""
    events: list[dict[str, Any]] = []
    for _ in range(100):
        reply = proxy.control.get(f"/sessions/{session}/trace")
        events = reply.json()["events"] if reply.status_code == 200 else []
        if len(events) >= count:
            return events
        time.sleep(0.1)
    return events


def assert_serving(proxy: ProxyProcess, upstream: FaultyUpstream) -> None:
    assert proxy.process.poll() is None, proxy.log_tail()
    assert through(proxy, "healthy").get(f"{upstream.http_base}/ok", timeout=10).status_code == 200


# (label, method, path or absolute URL builder, expected event status)
FAULTS: list[tuple[str, str, str, int]] = [
    ("connection refused", "GET", "refused", 0),
    ("connection refused (https)", "GET", "refused-tls", 0),
    ("untrusted certificate", "GET", "tls:/ok", 0),
    ("TLS to a plain HTTP port", "GET", "tls-to-plain:/ok", 0),
    ("client timeout on a hanging upstream", "GET", "/hang", 0),
    ("reset before the answer", "GET", "/reset-before-answer", 0),
    ("reset in the middle of the body", "GET", "/reset-mid-body", 0),
    ("closed without an answer", "GET", "/close-silently", 0),
    ("an answer that is not HTTP", "GET", "/not-http", 0),
    ("bad status line", "GET", "/bad-status-line", 0),
    ("header line without a colon", "GET", "/header-without-colon", 0),
    ("broken chunked encoding", "GET", "/bad-chunked", 0),
    ("Content-Length not a number", "GET", "/bad-content-length", 0),
    ("500", "POST", "/500", 500),
    ("503", "GET", "/503", 503),
    ("Content-Encoding gzip that is not gzip", "GET", "/bad-gzip-response", 200),
    ("unknown charset in the answer", "GET", "/unknown-charset-response", 200),
    ("JSON answer cut short", "GET", "/bad-json-response", 200),
]


TUNNEL_FAILURES = frozenset({"refused-tls"})
"""Faults that stop an HTTPS tunnel from opening (with mitmproxy's default eager connection strategy)."""


def target(upstream: FaultyUpstream, where: str) -> str:
    if where == "refused":
        return f"http://127.0.0.1:{upstream.closed_port}/x"
    if where == "refused-tls":
        return f"https://127.0.0.1:{upstream.closed_port}/x"
    if where.startswith("tls:"):
        return upstream.tls_base + where[4:]
    if where.startswith("tls-to-plain:"):
        return upstream.http_base.replace("http://", "https://") + where[len("tls-to-plain:") :]
    return upstream.http_base + where


@pytest.mark.parametrize(("label", "method", "where", "status"), FAULTS, ids=[fault[0] for fault in FAULTS])
def test_upstream_fault_is_one_event_and_the_proxy_goes_on(proxy, upstream, label, method, where, status):
    session = "fault-" + label.replace(" ", "-")
    url = target(upstream, where)
    seen_by_client = send(proxy, session, method, url, data=b"x=1" if method == "POST" else None)
    events = events_of(proxy, session)
    assert len(events) == 1, (seen_by_client, events)
    event = events[0]
    if where in TUNNEL_FAILURES:
        # The client never got to send its request: the event is the CONNECT, for the authority.
        authority = url.split("/")[2]
        assert (event["method"], event["url"]) == ("CONNECT", f"https://{authority}/"), event
    else:
        assert (event["method"], event["url"]) == (method, url), event
    assert event["status"] == status, (seen_by_client, event)
    if status == 0:
        assert event["error"], event  # the reason the exchange failed
    assert_serving(proxy, upstream)


def multipart(boundary: str, *, close: bool) -> bytes:
    part = f'--{boundary}\r\nContent-Disposition: form-data; name="title"\r\n\r\nHello\r\n'
    upload = f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.bin"\r\n\r\n'
    body = (part + upload).encode() + b"\x00\xff" * 50
    return body + (f"\r\n--{boundary}--\r\n".encode() if close else b"")


# (label, headers, body)
ODD_BODIES: list[tuple[str, dict[str, str], bytes]] = [
    (
        "gzip header, body not gzip",
        {"Content-Type": "application/json", "Content-Encoding": "gzip"},
        b'{"a": 1}',
    ),
    (
        "gzip body cut short",
        {"Content-Type": "application/json", "Content-Encoding": "gzip"},
        gzip.compress(b'{"sku": "A7", "qty": "2"}' * 50)[:40],
    ),
    ("unknown Content-Encoding", {"Content-Type": "text/plain", "Content-Encoding": "zstd-ish"}, b"hello"),
    (
        "latin-1 bytes declared utf-8",
        {"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"},
        b"name=caf\xe9&qty=2",
    ),
    ("unknown charset", {"Content-Type": "application/x-www-form-urlencoded; charset=klingon"}, b"sku=A7"),
    ("bad percent-encoding", {"Content-Type": "application/x-www-form-urlencoded"}, b"sku=%zz&qty=%E2%82"),
    (
        "truncated multipart",
        {"Content-Type": "multipart/form-data; boundary=XyZ"},
        multipart("XyZ", close=False),
    ),
    ("multipart without boundary", {"Content-Type": "multipart/form-data"}, multipart("XyZ", close=True)),
    (
        "multipart, wrong boundary",
        {"Content-Type": "multipart/form-data; boundary=Other"},
        multipart("XyZ", close=True),
    ),
    ("JSON cut short", {"Content-Type": "application/json"}, b'{"sku": "A7", "qty": '),
    ("JSON nested 5000 deep", {"Content-Type": "application/json"}, b"[" * 5000 + b"]" * 5000),
    ("binary as JSON", {"Content-Type": "application/json"}, bytes(range(256))),
    ("no Content-Type", {}, b"\x00\x01\x02 raw"),
    ("empty body with a type", {"Content-Type": "application/json"}, b""),
]


def test_odd_request_bodies_never_break_capture_or_evaluation(proxy, upstream, tmp_path, oracle_python):
    """Every odd body is one 200 event; the session still evaluates, its HAR still loads."""
    control = proxy.control
    assert control.post("/sessions", {"task_id": MUTATE_TASK, "session": "odd-bodies"}).status_code == 200
    client = through(proxy, "odd-bodies")
    for label, headers, body in ODD_BODIES:
        reply = client.post(f"{upstream.http_base}/ok", data=body, headers=headers, timeout=10)
        assert reply.status_code == 200, label
        assert reply.json()["received"] == len(body), label  # forwarded unchanged
    events = events_of(proxy, "odd-bodies", len(ODD_BODIES))
    assert [event["status"] for event in events] == [200] * len(ODD_BODIES)
    finish = control.post("/sessions/odd-bodies/finish", {"task_type": "MUTATE", "status": "SUCCESS"})
    assert finish.status_code == 200 and finish.json()["status"] == "failure", finish.text
    har = proxy.output_dir / str(MUTATE_TASK) / "network.har"
    assert len(load_trace(har)) == len(ODD_BODIES)
    assert json.loads(har.read_text())["log"]["entries"][0]["request"]["postData"]["text"]
    # The reference reads the same odd HAR and reaches the same verdict.
    tasks = write_tasks(tmp_path)
    verdict = oracle_verdict(oracle_python, tasks, MUTATE_TASK, har.parent, upstream.http_base)
    assert verdict == {"status": "failure", "score": 0.0}
    assert_serving(proxy, upstream)


def test_faults_are_journaled_too(proxy):
    journal = find_journal(Path(proxy.output_dir) / ".journal", "fault-connection-refused", None)
    lines = [json.loads(line) for line in journal.read_text().splitlines()]
    assert len(lines) == 1 and lines[0]["response"]["status"] == 0 and lines[0]["_error"]


def test_a_run_full_of_faults_is_judged_like_the_reference(proxy, upstream, tmp_path, oracle_python):
    """Status-0 events (refused, reset, TLS, a failed tunnel) and 5xx in a HAR: the live verdict is
    the one the reference gives the written files."""
    control = proxy.control
    assert control.post("/sessions", {"task_id": NAVIGATE_TASK, "session": "faulty-run"}).status_code == 200
    for where in ("refused", "refused-tls", "/reset-mid-body", "/500", "/not-http", "tls:/ok"):
        send(proxy, "faulty-run", "GET", target(upstream, where), headers={"Accept": "text/html"})
    page = through(proxy, "faulty-run").get(
        f"{upstream.http_base}/products/7", headers={"Accept": "text/html"}, timeout=10
    )
    assert page.status_code == 200
    send(proxy, "faulty-run", "GET", target(upstream, "/503"), headers={"Accept": "application/json"})
    assert len(events_of(proxy, "faulty-run", 8)) == 8
    finish = control.post("/sessions/faulty-run/finish", {"task_type": "NAVIGATE", "status": "SUCCESS"})
    assert finish.status_code == 200, finish.text
    live = finish.json()
    task_dir = proxy.output_dir / str(NAVIGATE_TASK)
    verdict = oracle_verdict(
        oracle_python, write_tasks(tmp_path), NAVIGATE_TASK, task_dir, upstream.http_base
    )
    assert verdict == {"status": live["status"], "score": live["score"]}
    assert live["status"] == "success"


def test_a_failed_tunnel_to_a_host_outside_the_site_map_is_no_event(proxy, upstream):
    """What a browser opens by itself (autofill, update checks) is not the agent's doing."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        elsewhere = probe.getsockname()[1]
    seen_by_client = send(proxy, "background", "GET", f"https://127.0.0.1:{elsewhere}/update")
    assert seen_by_client == "ProxyError"  # the client still learns the tunnel failed (502)
    assert proxy.control.get("/sessions/background").status_code == 404  # no event, no session
    assert_serving(proxy, upstream)
