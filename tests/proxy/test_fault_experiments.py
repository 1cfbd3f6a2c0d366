"""Faults made on purpose as an experimenter meets them, through real `webarena-live serve` processes in
front of a real site on 127.0.0.1 and plain HTTP clients on each session's own address: a latency the
client gave up on is the fault's doing wherever it is counted, and a loaded plan shows in the banner and
`/health`."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests

from tests.support.counter_replicas import READ
from tests.support.serve_process import NAVIGATION, finish, wait_until
from tests.support.site_sessions import read, serve, site
from webarena_live.evaluator import report_run
from webarena_live.runs.fault_log import FaultLine, FaultLog, faults_path, read_fault_log
from webarena_live.runs.fault_plan import FaultsError, parse_faults

__all__ = ["site"]

ANSWER = {"task_type": "RETRIEVE", "status": "SUCCESS", "retrieved_data": ["nothing"]}
GAVE_UP_PLAN = {
    "seed": 1,
    "rules": [
        {"path": "^/lat$", "probability": 1, "fault": "latency", "seconds": 2.5},
        {"path": "^/(waited|broken/)", "probability": 1, "fault": "latency", "seconds": 0.2},
    ],
}


def give_up(proxy: str, url: str, *, after: float) -> bytes:
    """Send a navigation to `url` through `proxy` and wait `after` seconds for its answer, then close the
    connection as `curl -m` does: what came back by then (nothing, when the client gave up)."""
    where = urlsplit(proxy)
    host = urlsplit(url).netloc
    head = "".join(f"{name}: {value}\r\n" for name, value in NAVIGATION.items())
    with socket.create_connection((where.hostname or "127.0.0.1", where.port or 80), timeout=after) as sock:
        sock.sendall(f"GET {url} HTTP/1.1\r\nHost: {host}\r\n{head}\r\n".encode())
        try:
            return sock.recv(65536)
        except TimeoutError:
            return b""


def start(control: str, session: str, **extra: Any) -> dict[str, Any]:
    body = {"task_id": READ, "session": session, "run": session, **extra}
    reply = requests.post(f"{control}/sessions", json=body, timeout=30)
    assert reply.status_code == 200, reply.text
    started: dict[str, Any] = reply.json()
    return started


def trace(control: str, session: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = requests.get(f"{control}/sessions/{session}/trace", timeout=10).json()[
        "events"
    ]
    return events


def test_a_latency_the_client_gave_up_on_is_the_faults_doing_wherever_it_is_counted(
    tmp_path: Path, site: str
) -> None:
    faults = tmp_path / "faults.json"
    faults.write_text(json.dumps(GAVE_UP_PLAN))
    served = serve(tmp_path / "run", site, "--faults", str(faults))
    try:
        started = start(served.control, "patient")
        proxy = {"http": started["proxy"]}
        assert give_up(started["proxy"], f"{site}/lat", after=1.0) == b""  # gone before the pause ends
        # mitmproxy tells the flow's end once the pause is over: the client's leaving is in the trace
        wait_until("the abandoned request in the trace", lambda: len(trace(served.control, "patient")) == 1)
        waited = requests.get(f"{site}/waited", proxies=proxy, headers=NAVIGATION, timeout=10)
        broken = requests.get(f"{site}/broken/1", proxies=proxy, headers=NAVIGATION, timeout=10)
        assert (waited.status_code, broken.status_code) == (200, 500)
        events = trace(served.control, "patient")
        assert [(e["url"], e["status"]) for e in events] == [
            (f"{site}/lat", 0), (f"{site}/waited", 200), (f"{site}/broken/1", 500)
        ]  # fmt: skip
        finished = finish(served.control, "patient", ANSWER)
        assert finished.status_code == 200, finished.text
        answer = finished.json()
        view = requests.get(f"{served.control}/sessions/patient", timeout=10).json()
        journal = Path(view["journal"])
    finally:
        served.stop()
    # the abandoned request is the fault's: every judged request answered, the site's own 500 still counts
    assert answer["sites_answered"] is True and "unanswered" not in answer
    assert answer["site_errors"]["count"] == 1
    assert answer["site_errors"]["first"] == [{"method": "GET", "url": f"{site}/broken/1", "status": 500}]
    made = answer["faults_injected"]
    assert [(f["url"], f["fault"], f["failing"], f.get("client_gave_up", False)) for f in made] == [
        (f"{site}/lat", "latency", True, True),
        (f"{site}/waited", "latency", False, False),
        (f"{site}/broken/1", "latency", False, False),
    ]
    assert view["faults_injected"] == made and view["sites_answered"] is True
    folder = Path(view["outputs"]["attempt.json"]).parent
    record = read(folder, "attempt.json")
    assert record["faults_injected"] == made and record["site_errors"] == answer["site_errors"]
    # a run resumed from its journal goes on with the fault as it ended
    assert [line.record for line in read_fault_log(journal)] == made
    figures = report_run(folder.parent).to_dict()
    assert figures["site_errors"]["verdicts"] == 1  # the 500's, not the abandoned request's
    assert figures["faults"]["by_task"][str(READ)]["faults"] == 3


def test_a_client_that_gives_up_on_a_site_that_never_answers_is_still_the_sites_failure(
    tmp_path: Path, site: str
) -> None:
    """No fault drawn: a request the client abandoned because the site kept it waiting is the site's."""
    hanging = socket.create_server(("127.0.0.1", 0))
    hanging.listen()
    try:
        slow = f"http://127.0.0.1:{hanging.getsockname()[1]}"
        served = serve(tmp_path / "run", slow)
        try:
            started = start(served.control, "abandoned")
            assert give_up(started["proxy"], f"{slow}/p/1", after=1.0) == b""
            wait_until("the abandoned request in the trace", lambda: trace(served.control, "abandoned"))
            finished = finish(served.control, "abandoned", ANSWER)
            assert finished.status_code == 200, finished.text
        finally:
            served.stop()
    finally:
        hanging.close()
    answer = finished.json()
    assert "faults_injected" not in answer
    assert answer["sites_answered"] is False and answer["unanswered"]["count"] == 1
    assert answer["site_errors"]["count"] == 1


def test_a_fault_journaled_again_as_it_ended_is_read_back_where_it_was_listed(tmp_path: Path) -> None:
    journal = tmp_path / "agent-1-20261129T000000.000000.jsonl"
    held = {"rule": 0, "fault": "latency", "site": "__SHOPPING__", "method": "GET", "url": "http://h/lat",
            "seconds": 2.5, "failing": False}  # fmt: skip
    other = {**held, "rule": 1, "url": "http://h/p/1"}
    log = FaultLog(journal)
    log.append(FaultLine(held, "GET", "__SHOPPING__/lat", 0))
    log.append(FaultLine(other, "GET", "__SHOPPING__/p/1", 0))
    ended = {**held, "failing": True, "client_gave_up": True}
    log.append(FaultLine(ended, "GET", "__SHOPPING__/lat", 0), ended=True)
    assert b'"ended":true' in faults_path(journal).read_bytes().splitlines()[2]
    assert [fault.record for fault in read_fault_log(journal)] == [ended, other]
    # an ended line whose draw's own line was lost is still the fault, listed where it comes
    faults_path(journal).write_bytes(b"".join(faults_path(journal).read_bytes().splitlines(True)[1:]))
    assert [fault.record for fault in read_fault_log(journal)] == [other, ended]


EVERY_RULE_WRONG = {"rules": [{"probability": 1.5, "fault": "drop"}]}


@pytest.mark.parametrize(
    ("data", "lines"),
    [
        (EVERY_RULE_WRONG, ["faults: rules[0].probability: Input should be less than or equal to 1"]),
        (
            {"rules": [{"probability": 1.5, "fault": "drop"}, {"probability": 1, "fault": "fire"}]},
            [
                "faults: rules[0].probability: Input should be less than or equal to 1",
                "faults: rules[1].fault: Input should be 'latency', 'status', 'drop' or 'slow_body'",
            ],
        ),
        ({"rules": [{"probability": 1.5, "fault": "drop"}, {"probability": 1, "fault": "drop"}]},
         ["faults: rules[0].probability: Input should be less than or equal to 1"]),
        ({"rules": []}, ["faults: rules: must list at least one rule"]),
    ],
)  # fmt: skip
def test_a_plan_whose_every_rule_is_wrong_is_refused_one_line_per_mistake(
    data: dict[str, Any], lines: list[str]
) -> None:
    with pytest.raises(FaultsError) as caught:
        parse_faults(data)
    assert str(caught.value).splitlines() == lines


def test_serve_and_a_start_refuse_a_plan_whose_every_rule_is_wrong_in_one_line(
    tmp_path: Path, site: str
) -> None:
    faults = tmp_path / "faults.json"
    faults.write_text(json.dumps(EVERY_RULE_WRONG))
    cli = str(Path(sys.executable).with_name("webarena-live"))
    refused = subprocess.run(
        [cli, "serve", "--faults", str(faults), "--port", "0", "--control-port", "0", "--session-port", "0",
         "--set", f"confdir={tmp_path / 'conf'}"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert refused.returncode == 2
    assert refused.stderr.splitlines() == [
        f"webarena-live serve: webarena_faults: {faults}: rules[0].probability: "
        "Input should be less than or equal to 1"
    ]
    served = serve(tmp_path / "run", site)
    try:
        body = {"task_id": READ, "session": "wrong", "faults": EVERY_RULE_WRONG}
        reply = requests.post(f"{served.control}/sessions", json=body, timeout=30)
    finally:
        served.stop()
    assert reply.status_code == 400 and reply.json()["error"] == "bad_faults"
    assert reply.json()["detail"] == "faults: rules[0].probability: Input should be less than or equal to 1"


def banner_of(served: Any) -> list[str]:
    """The banner's lines, once printed (a fleet's after `/health` first answers)."""
    wait_until("the banner", lambda: "\n  journal " in served.log_tail(1_000_000))  # printed at once
    return [line for line in served.log_tail(1_000_000).splitlines() if line.startswith("  ")]


def test_a_loaded_plan_shows_in_the_banner_and_health_and_no_plan_shows_none(
    tmp_path: Path, site: str
) -> None:
    faults = tmp_path / "faults.json"
    faults.write_text(json.dumps({**GAVE_UP_PLAN, "seed": 7}))
    summary = {"seed": 7, "rules": 2, "kinds": {"latency": 2}, "source": str(faults)}
    line = f"  faults        seed 7, 2 rules (2 latency) from {faults}"
    for label, extra in (("one", ()), ("fleet", ("--workers", "2"))):
        served = serve(tmp_path / label, site, "--faults", str(faults), *extra)
        try:
            assert requests.get(f"{served.control}/health", timeout=10).json()["faults"] == summary
            assert line in banner_of(served), label
        finally:
            served.stop()
    plain = serve(tmp_path / "plain", site)
    try:
        assert requests.get(f"{plain.control}/health", timeout=10).json()["faults"] is None
        assert not any(said.startswith("  faults") for said in banner_of(plain))
    finally:
        plain.stop()


def test_idle_traffic_is_never_faulted_and_default_is_once_started(tmp_path: Path, site: str) -> None:
    """Without credentials traffic is session `default`'s: idle until a start names it (then faulted as
    any session), its first request and its later ones alike."""
    faults = tmp_path / "faults.json"
    faults.write_text(
        json.dumps({"seed": 3, "rules": [{"path": "^/p/", "probability": 1, "fault": "status"}]})
    )
    served = serve(tmp_path / "run", site, "--faults", str(faults))
    proxy = {"http": served.proxy_url}
    try:
        idle = [
            requests.get(f"{site}/p/{n}", proxies=proxy, headers=NAVIGATION, timeout=10) for n in range(3)
        ]
        assert [reply.status_code for reply in idle] == [200, 200, 200]
        before = requests.get(f"{served.control}/sessions/default", timeout=10).json()
        assert "faults_injected" not in before
        start(served.control, "default")
        started = requests.get(f"{site}/p/0", proxies=proxy, headers=NAVIGATION, timeout=10)
        assert started.status_code == 503
        view = requests.get(f"{served.control}/sessions/default", timeout=10).json()
    finally:
        served.stop()
    assert [(f["url"], f["status"]) for f in view["faults_injected"]] == [(f"{site}/p/0", 503)]
