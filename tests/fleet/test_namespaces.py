"""No stranger in, on real addresses: `serve --workers 2` in one network namespace, its agents in two
others, each joined to it by a veth pair (addresses only inside the namespaces, all removed after).

A session opened from namespace A is reached from A (captured) and refused from B (407, counted in
`/health`) unless B sends the session's secret as proxy credentials; the control API on a namespace
address without a token refuses to start. No traffic leaves the namespaces and loopback.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from webarena_live.launch import free_ports, serve_command

pytestmark = [
    pytest.mark.timeout(240),
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root (CI runs as root)"),
]

FRONT, A, B = "10.233.1.1", "10.233.1.2", "10.233.2.2"
FRONT_B = "10.233.2.1"
"""The front's namespace's address on the link to B."""
TOKEN = "namespace-test-token"


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


@pytest.fixture(scope="module")
def namespaces() -> Iterator[dict[str, str]]:
    tag = uuid.uuid4().hex[:6]
    names = {"front": f"wlf{tag}", "a": f"wla{tag}", "b": f"wlb{tag}"}
    try:
        for name in names.values():
            _ip("netns", "add", name)
            _ip("-n", name, "link", "set", "lo", "up")
        for side, (near, far, prefix) in {"a": (FRONT, A, "1"), "b": (FRONT_B, B, "2")}.items():
            ours, theirs = f"f{side}{tag}", f"{side}f{tag}"
            _ip("link", "add", ours, "netns", names["front"], "type", "veth", "peer", "name", theirs,
                "netns", names[side])  # fmt: skip
            _ip("-n", names["front"], "addr", "add", f"{near}/24", "dev", ours)
            _ip("-n", names[side], "addr", "add", f"{far}/24", "dev", theirs)
            _ip("-n", names["front"], "link", "set", ours, "up")
            _ip("-n", names[side], "link", "set", theirs, "up")
            assert prefix
        yield names
    finally:
        for name in names.values():
            subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)


def _in(namespace: str, code: str, *, timeout: float = 60) -> Any:
    """Run Python `code` in `namespace`; the JSON it prints last."""
    run = subprocess.run(
        ["ip", "netns", "exec", namespace, sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True, text=True, timeout=timeout, env={**os.environ, "NO_PROXY": "*"},
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


CLIENT = """
import json, requests
session = requests.Session(); session.trust_env = False
def get(url, proxy, **kw):
    reply = session.get(url, proxies={"http": proxy}, timeout=20, headers={"Accept": "text/html",
        "Sec-Fetch-Dest": "document", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Site": "none"}, **kw)
    return reply.status_code
"""


@pytest.fixture(scope="module")
def fleet(namespaces: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("netns")
    shop_port, port, session_port, control = free_ports(4)
    shop = subprocess.Popen(
        ["ip", "netns", "exec", namespaces["front"], sys.executable, "-c",
         f"import time; from webarena_live.demo import site; site.serve('127.0.0.1', {shop_port}); "
         "time.sleep(3600)"],
    )  # fmt: skip
    config = tmp / "config.json"
    config.write_text(
        json.dumps({"environments": {"__SHOPPING__": {"urls": [f"http://127.0.0.1:{shop_port}"]}}})
    )
    argv = [*serve_command(), "--workers", "2", "--listen-host", "0.0.0.0", "--control-host", "0.0.0.0",
            "--port", str(port), "--session-port", str(session_port), "--control-port", str(control),
            "--config", str(config), "--output-dir", str(tmp / "out"),
            "--set", f"confdir={tmp / 'conf'}"]  # fmt: skip
    env = {**os.environ, "WEBARENA_LIVE_CONTROL_TOKEN": TOKEN, "XDG_STATE_HOME": str(tmp / "state")}
    log = (tmp / "serve.log").open("wb")
    served = subprocess.Popen(["ip", "netns", "exec", namespaces["front"], *argv], env=env, stdout=log,
                              stderr=subprocess.STDOUT)  # fmt: skip
    control_url = f"http://{FRONT}:{control}"
    _in(namespaces["a"], f"""
        import json, time, requests
        for _ in range(600):
            try:
                if requests.get("{control_url}/health", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            time.sleep(0.1)
        print(json.dumps(True))
    """)  # fmt: skip
    yield {"control": control_url, "shop": f"http://127.0.0.1:{shop_port}", "log": tmp / "serve.log",
           "served": served}  # fmt: skip
    for process in (served, shop):
        process.send_signal(2)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
    log.close()


def test_a_session_address_lets_in_only_its_own_client(
    fleet: dict[str, Any], namespaces: dict[str, str]
) -> None:
    control, shop = fleet["control"], fleet["shop"]
    auth = f"{{'Authorization': 'Bearer {TOKEN}'}}"
    started = _in(namespaces["a"], f"""
        import json, requests
        reply = requests.post("{control}/sessions", json={{"task_id": 1003, "session": "from-a"}},
                              headers={auth}, timeout=30)
        print(json.dumps(reply.json()))
    """)  # fmt: skip
    port = started["proxy"].rsplit(":", 1)[1]
    secret = started["secret"]
    mine = _in(namespaces["a"], CLIENT + f"print(json.dumps(get('{shop}/?by=a', 'http://{FRONT}:{port}')))")
    assert mine == 200
    stranger = _in(
        namespaces["b"], CLIENT + f"print(json.dumps(get('{shop}/?by=b', 'http://{FRONT_B}:{port}')))"
    )
    assert stranger == 407
    with_secret = _in(
        namespaces["b"],
        CLIENT + f"print(json.dumps(get('{shop}/?by=b-secret', 'http://from-a:{secret}@{FRONT_B}:{port}')))",
    )
    assert with_secret == 200
    seen = _in(namespaces["a"], f"""
        import json, requests
        trace = requests.get("{control}/sessions/from-a/trace", headers={auth}, timeout=30).json()
        health = requests.get("{control}/health", timeout=30).json()
        urls = [e["url"] for e in trace["events"]]
        print(json.dumps({{"urls": urls, "refused": health["refused_strangers"]}}))
    """)  # fmt: skip
    assert seen["urls"] == [f"{shop}/?by=a", f"{shop}/?by=b-secret"]
    assert seen["refused"] == 1
    denied = _in(namespaces["b"], f"""
        import json, requests
        reply = requests.get("{control}/sessions".replace("{FRONT}", "{FRONT_B}"), timeout=30)
        print(json.dumps(reply.status_code))
    """)  # fmt: skip
    assert denied == 401  # and the control API itself wants the token


def test_a_control_api_beyond_loopback_without_a_token_refuses_to_start(namespaces: dict[str, str]) -> None:
    argv = [*serve_command(), "--listen-host", "127.0.0.1", "--control-host", FRONT, "--port", "0",
            "--session-port", "0", "--control-port", "0"]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "WEBARENA_LIVE_CONTROL_TOKEN"}
    run = subprocess.run(["ip", "netns", "exec", namespaces["front"], *argv], capture_output=True, text=True,
                         timeout=60, env=env)  # fmt: skip
    assert run.returncode == 2
    assert run.stderr.strip().splitlines() == [
        f"webarena-live serve: --control-host {FRONT} listen beyond loopback, where anyone on the network "
        "could drive or finish sessions: give a control token "
        "(--control-token, or WEBARENA_LIVE_CONTROL_TOKEN)"
    ]


def test_nothing_of_the_namespaces_shows_outside(namespaces: dict[str, str]) -> None:
    """The test's addresses exist only inside its namespaces."""
    addresses = subprocess.run(["ip", "-o", "addr"], capture_output=True, text=True, timeout=30).stdout
    assert "10.233." not in addresses
    assert Path(f"/run/netns/{namespaces['front']}").exists()
