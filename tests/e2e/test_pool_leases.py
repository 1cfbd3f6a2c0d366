"""Leases that end, end: `POST /sessions/{s}/abandon` and an idle `--lease-timeout` give the replicas
back at once; from then on the session's own address forwards nothing (the proxy answers 410 itself and
counts it) and the replica is left as it was; a later finish still judges, says `lease_ended`, and its
reward is masked. In one process and with `--workers 2` (the front holds the pool), on replicas of a
real counter site with real reset endpoints (`tests/support/counter_replicas.py`), through real proxies.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.site.harness import ProxyProcess, start_proxy
from tests.support.counter_replicas import (
    DEMO_TASKS,
    MUTATE,
    READ,
    READ_TOO,
    Counter,
    counter_config,
    counters,
)
from webarena_live.rewards.reward import judged

pytestmark = pytest.mark.timeout(300)

CHANGED = {"task_type": "MUTATE", "status": "SUCCESS", "retrieved_data": None}
MODES = {"one process": [], "two workers": ["--workers", "2"]}


@pytest.fixture
def served(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[ProxyProcess, list[Counter]]]:
    count, args = request.param
    with counters(count) as replicas:
        config = counter_config(tmp_path / "sites.json", replicas)
        proxy = start_proxy(tmp_path / "serve", tasks=DEMO_TASKS, config=config, extra_args=args)
        try:
            yield proxy, replicas
        finally:
            proxy.stop()


def start(proxy: ProxyProcess, task_id: int, session: str, **more: Any) -> requests.Response:
    body = {"task_id": task_id, "session": session, **more}
    return requests.post(f"{proxy.control_url}/sessions", json=body, timeout=60)


def through(started: dict[str, Any]) -> dict[str, str]:
    return {"http": started["proxy"]}


def attempt_record(proxy: ProxyProcess, session: str) -> dict[str, Any]:
    found = [
        record
        for path in proxy.output_dir.rglob("attempt.json")
        if (record := json.loads(path.read_text()))["session"] == session
    ]
    assert len(found) == 1, found
    return found[0]


@pytest.mark.parametrize(
    "served",
    [(1, ["--isolation", "exclusive", *args]) for args in MODES.values()],
    ids=list(MODES),
    indirect=True,
)
def test_abandon_gives_the_replica_back_and_the_session_forwards_nothing_more(
    served: tuple[ProxyProcess, list[Counter]],
) -> None:
    proxy, (replica,) = served
    control = proxy.control_url
    quitter = start(proxy, MUTATE, "quitter").json()
    assert requests.get(f"{replica.url}/", proxies=through(quitter), timeout=30).status_code == 200
    assert requests.post(f"{replica.url}/add", proxies=through(quitter), timeout=30).status_code == 200
    assert replica.value == 1
    refused = start(proxy, READ, "next")
    assert refused.status_code == 503 and refused.headers["Retry-After"].isdigit()
    assert "replica 0 held by a mutating task (session quitter)" in refused.json()["detail"]

    abandoned = requests.post(f"{control}/sessions/quitter/abandon", json={"reason": "gave up"}, timeout=30)
    assert abandoned.status_code == 200, abandoned.text
    assert abandoned.json()["lease_ended"] == "abandoned" and abandoned.json()["reason"] == "gave up"
    again = requests.post(f"{control}/sessions/quitter/abandon", timeout=30)  # no body: still ended
    assert again.status_code == 200 and again.json()["lease_ended"] == "abandoned"

    page = requests.post(f"{replica.url}/add", proxies=through(quitter), timeout=30)
    assert page.status_code == 410 and "lease has ended" in page.text and "abandoned" in page.text
    assert replica.site.posts == 1  # nothing forwarded: the replica never saw it

    following = start(proxy, READ_TOO, "next", wait=30)  # the changed replica is reset first
    assert following.status_code == 200, following.text
    assert replica.value == 0 and replica.reset.done == 1
    assert requests.get(f"{replica.url}/", proxies=through(following.json()), timeout=30).status_code == 200

    view = requests.get(f"{control}/sessions/quitter", timeout=30).json()
    assert view["lease_ended"] == "abandoned" and view["lease_ended_reason"] == "gave up"
    assert view["refused_after_lease_end"] == 1
    finish = requests.post(f"{control}/sessions/quitter/finish", json=CHANGED, timeout=60)
    assert finish.status_code == 200, finish.text
    result = finish.json()
    assert result["lease_ended"] == "abandoned" and result["status"] in ("success", "failure")
    record = attempt_record(proxy, "quitter")
    assert record["lease_ended"] == "abandoned" and record["refused_after_lease_end"] == 1
    eval_result = json.loads((proxy.output_dir.glob("**/eval_result.json").__next__()).read_text())
    assert "lease_ended" not in eval_result  # the reference's document, as ever
    reward = judged("quitter", result)
    assert reward.masked and reward.kind == "lease_ended" and "abandoned" in (reward.reason or "")

    unknown = requests.post(f"{control}/sessions/nobody/abandon", timeout=30)
    assert unknown.status_code == 404 and unknown.json()["error"] == "unknown_session"
    bad = requests.post(f"{control}/sessions/next/abandon", json={"reason": 3}, timeout=30)
    assert bad.status_code == 400 and bad.json()["error"] == "bad_request"
    finished = requests.post(f"{control}/sessions/quitter/abandon", timeout=30)
    assert finished.status_code == 409 and finished.json()["error"] == "already_finished"


IDLE_TIMEOUT = 4.0
"""Seconds: the busy session's requests come far more often than this even on a loaded machine, where
one round trip through a worker can take a second; the idle one's lease ends within a few seconds."""


@pytest.mark.parametrize(
    "served",
    [
        (2, ["--isolation", "exclusive", "--lease-timeout", f"{IDLE_TIMEOUT:g}", *args])
        for args in MODES.values()
    ],
    ids=list(MODES),
    indirect=True,
)
def test_an_idle_lease_times_out_while_a_busy_session_keeps_its_own(
    served: tuple[ProxyProcess, list[Counter]],
) -> None:
    proxy, replicas = served
    control = proxy.control_url
    idle, busy = start(proxy, READ, "idle").json(), start(proxy, READ_TOO, "busy").json()
    by_url = {r.url: r for r in replicas}
    idle_replica = by_url[idle["replicas"]["__SHOPPING__"]]
    busy_replica = by_url[busy["replicas"]["__SHOPPING__"]]
    requests.get(f"{idle_replica.url}/", proxies=through(idle), timeout=30)
    deadline = time.monotonic() + 30
    while True:  # the busy one works well past the timeout; /health is no call of either session
        assert requests.get(f"{busy_replica.url}/", proxies=through(busy), timeout=30).status_code == 200
        if requests.get(f"{control}/health", timeout=30).json()["pool"]["leases"] == 1:
            break
        assert time.monotonic() < deadline, "the idle lease never ended"
        time.sleep(0.4)
    more = time.monotonic() + IDLE_TIMEOUT + 1
    while time.monotonic() < more:  # more work, past the timeout again: the busy lease stays
        assert requests.get(f"{busy_replica.url}/", proxies=through(busy), timeout=30).status_code == 200
        time.sleep(0.4)
    assert requests.get(f"{control}/health", timeout=30).json()["pool"]["leases"] == 1
    seen = idle_replica.site.requests
    page = requests.post(f"{idle_replica.url}/add", proxies=through(idle), timeout=30)
    assert page.status_code == 410 and "--lease-timeout" in page.text
    assert idle_replica.site.posts == 0 and idle_replica.site.requests == seen  # never reached it
    busy_view = requests.get(f"{control}/sessions/busy", timeout=30).json()
    assert "lease_ended" not in busy_view
    answer = {"task_type": "RETRIEVE", "status": "SUCCESS", "retrieved_data": ["x"]}
    result = requests.post(f"{control}/sessions/idle/finish", json=answer, timeout=60).json()
    assert result["lease_ended"] == "timeout"
    assert (
        "lease_ended" not in requests.post(f"{control}/sessions/busy/finish", json=answer, timeout=60).json()
    )
