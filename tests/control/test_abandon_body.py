"""`POST /sessions/{s}/abandon` reads its body as JSON whatever the content type, as `POST /sessions`
does: the README's `curl ... -d '{"reason": "gave up"}'` (a form's content type) and a body sent with no
content type both abandon with their reason; an empty body abandons with none; anything else is a 400
that names the problem and ends nothing.

`parse_abandon` directly, then real `serve` processes (one process, and a fleet's front before two
workers) on one replica of a real counter site, and the real `curl`.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import pytest
import requests

from tests.site.harness import ProxyProcess, start_proxy
from tests.support.counter_replicas import DEMO_TASKS, READ, Counter, counter_config, counters
from webarena_live.control.bodies import ControlError, parse_abandon

pytestmark = pytest.mark.timeout(300)


def test_an_abandon_body_is_json_or_nothing() -> None:
    assert parse_abandon(b"") is None and parse_abandon(b"  \n") is None
    assert parse_abandon(b'{"reason": "gave up"}').reason == "gave up"  # type: ignore[union-attr]
    assert parse_abandon(b"{}").reason is None  # type: ignore[union-attr]
    for body, said in [(b"reason=gave+up", "not valid JSON"), (b'["gave up"]', "valid dictionary"),
                       (b'{"reason": 3}', "reason"), (b'{"why": "x"}', "why")]:  # fmt: skip
        with pytest.raises(ControlError) as refused:
            parse_abandon(body)
        assert refused.value.status == 400 and said in json.dumps(refused.value.detail), refused.value.detail


@pytest.fixture(scope="module")
def replica() -> Iterator[Counter]:
    with counters(1) as made:
        yield made[0]


@pytest.fixture(scope="module", params=[(), ("--workers", "2")], ids=["one process", "two workers"])
def proxy(
    request: pytest.FixtureRequest, replica: Counter, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ProxyProcess]:
    workdir = tmp_path_factory.mktemp("abandon")
    config = counter_config(workdir / "sites.json", [replica])
    running = start_proxy(workdir / "proxy", tasks=DEMO_TASKS, config=config,
                          extra_args=["--isolation", "exclusive", *request.param])  # fmt: skip
    yield running
    running.stop()


def _start(proxy: ProxyProcess, session: str) -> None:
    reply = requests.post(
        f"{proxy.control_url}/sessions", json={"task_id": READ, "session": session}, timeout=60
    )
    assert reply.status_code == 200, reply.text


def test_curl_as_the_readme_writes_it_abandons_with_its_reason(proxy: ProxyProcess) -> None:
    _start(proxy, "curl-form")
    url = f"{proxy.control_url}/sessions/curl-form/abandon"
    curl = ["curl", "-sS", "-X", "POST", url, "-d", '{"reason": "gave up"}']  # a form's content type
    done = subprocess.run(curl, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("{"), (done.stdout, done.stderr)
    answer = json.loads(done.stdout)
    assert answer["session"] == "curl-form" and answer["reason"] == "gave up", answer
    view = requests.get(f"{proxy.control_url}/sessions/curl-form", timeout=30).json()
    assert view.get("lease_ended"), view


def test_no_content_type_and_an_empty_body_abandon_too(proxy: ProxyProcess) -> None:
    _start(proxy, "no-type")
    request = requests.Request("POST", f"{proxy.control_url}/sessions/no-type/abandon",
                               data=b'{"reason": "no type"}').prepare()  # fmt: skip
    request.headers.pop("Content-Type", None)
    with requests.Session() as http:
        reply = http.send(request, timeout=60)
    assert reply.status_code == 200 and reply.json()["reason"] == "no type", reply.text
    _start(proxy, "empty")
    reply = requests.post(f"{proxy.control_url}/sessions/empty/abandon", timeout=60)
    assert reply.status_code == 200 and reply.json()["session"] == "empty", reply.text


def test_a_body_that_is_no_abandon_is_refused_and_ends_nothing(proxy: ProxyProcess) -> None:
    _start(proxy, "refused")
    reply = requests.post(f"{proxy.control_url}/sessions/refused/abandon", data="reason=gave+up", timeout=60,
                          headers={"Content-Type": "application/x-www-form-urlencoded"})  # fmt: skip
    assert reply.status_code == 400 and reply.json()["error"] == "bad_json", reply.text
    view = requests.get(f"{proxy.control_url}/sessions/refused", timeout=30).json()
    assert not view.get("lease_ended"), view
    assert (
        requests.post(f"{proxy.control_url}/sessions/refused/abandon", json={}, timeout=60).status_code == 200
    )
