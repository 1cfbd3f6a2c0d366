"""`serve --workers 2 --ray` across two machines, and the faults of a fleet across machines.

The machines are two network namespaces this module makes (`tests/support/netns.py`): the front's
(its Ray head, `serve --ray` with the default loopback control port and no token) and a node's (a
second Ray node with its agents), joined by a veth pair whose ends and addresses exist only inside
them; every process is stopped and both namespaces removed afterwards. Each machine has its own copy
of the demo shop on its loopback; agents browse through their sessions' own addresses on their own
machine (`near` its address). Nothing reaches any address outside the namespaces and loopback.

Ray runs as a user would run it: `ray start --head --node-ip-address=FRONT` inside the front's
namespace, `ray start --address=FRONT:6379 --node-ip-address=NODE` inside the node's, each in a
process group of its own. (`RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER` must not be 0 here: with 0, Ray's
`ray start --address` refuses to join a cluster on any system.) The head checks nodes every 0.5 s:
a killed raylet is known within seconds, while a cut link is not called death for about 25 s.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.netns import Namespaces, RayNode, machines
from tests.support.network_guard import allowing
from tests.support.ray_machines import (
    AGENT,
    FAST_HEALTH_CHECKS,
    FRONT,
    NETWORK,
    NODE,
    RAY_PORT,
    Agent,
    Control,
    children,
    chromium_episode,
    hold_ports,
    parent,
    read_sysctl,
    session_from,
    signal_all,
    write_sysctl,
)
from tests.support.serve_process import NAVIGATED, NAVIGATION
from webarena_live.addresses.credentials import CONTROL_TOKEN_ENV
from webarena_live.demo import site as demo_site
from webarena_live.fleet.workers.ray_actor import STATE_DIR
from webarena_live.fleet.workers.ray_workers import journals_name
from webarena_live.launch import free_ports, serve_command

pytestmark = [
    pytest.mark.timeout(420),
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root (CI runs as root)"),
]

PRODUCT = "/enamel-camp-mug.html"
HELD = (41000, 41049)
"""While the fleet starts, the front's machine hands out only these ports (its ephemeral range), and
on the node's machine they are all busy: a port picked on the front's machine for a worker on the
node's (`--web-port 0` before each worker picked its own) cannot be bound there."""
RANGE = "net.ipv4.ip_local_port_range"


@pytest.fixture(scope="module")
def spaces() -> Iterator[Namespaces]:
    with machines(["front", "node"], [("front", FRONT, "node", NODE)]) as made:
        subprocess.run(["ip", "-n", made.names["node"], "addr", "add", f"{AGENT}/24", "dev",
                        made.links["node"]], check=True, timeout=30)  # fmt: skip
        for role in ("front", "node"):  # no port the system picks (Ray's, the shops') is one to hold
            made.run(role, write_sysctl, RANGE, f"{HELD[1] + 1} 60999")
        yield made


@pytest.fixture(scope="module")
def shop(spaces: Namespaces) -> Iterator[str]:
    """The demo shop on each machine's loopback, at the same port."""
    here = spaces.run("front", demo_site.serve, "127.0.0.1", 0)
    there = spaces.run("node", demo_site.serve, "127.0.0.1", here.server_address[1])
    yield here.url
    here.shutdown()
    there.shutdown()


@pytest.fixture(scope="module")
def cluster(spaces: Namespaces, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, RayNode]]:
    log = tmp_path_factory.mktemp("ray") / "ray.log"
    env = allowing([NETWORK], {**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "1"})
    nodes: dict[str, RayNode] = {}
    try:
        head = ["--head", f"--node-ip-address={FRONT}", f"--port={RAY_PORT}", "--num-cpus=1",
                "--include-dashboard=false", f"--system-config={json.dumps(FAST_HEALTH_CHECKS)}"]  # fmt: skip
        nodes["front"] = RayNode(spaces, "front", *head, env=env, log=log)
        joined = [f"--address={FRONT}:{RAY_PORT}", f"--node-ip-address={NODE}", "--num-cpus=1"]
        nodes["node"] = RayNode(spaces, "node", *joined, env=env, log=log)
        yield nodes
    finally:
        for node in reversed(nodes.values()):
            node.stop()


@pytest.fixture(scope="module")
def fleet(
    spaces: Namespaces, cluster: dict[str, RayNode], shop: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    """`serve --workers 2 --ray FRONT:6379 --web --web-port 0` in the front's namespace, no token."""
    tmp = tmp_path_factory.mktemp("machines")
    config = tmp / "config.json"
    config.write_text(json.dumps({"environments": {"__SHOPPING__": {"urls": [shop]}}}))
    port, control_port = spaces.run("front", free_ports, 2)
    argv = [*serve_command(), "--workers", "2", "--ray", f"{FRONT}:{RAY_PORT}", "--config", str(config),
            "--output-dir", str(tmp / "out"), "--port", str(port), "--control-port", str(control_port),
            "--set", f"confdir={tmp / 'conf'}", "--web", "--web-port", "0"]  # fmt: skip
    env = allowing([NETWORK], {**os.environ, "XDG_STATE_HOME": str(tmp / "state")})
    env.pop(CONTROL_TOKEN_ENV, None)  # the default: a control port on loopback, no token
    control = Control(spaces, f"http://127.0.0.1:{control_port}")
    held = spaces.run("node", hold_ports, *HELD)
    usual = spaces.run("front", read_sysctl, RANGE)
    spaces.run("front", write_sysctl, RANGE, f"{HELD[0]} {HELD[1]}")
    log_path = tmp / "serve.log"
    with log_path.open("wb") as log:
        served = subprocess.Popen(spaces.exec("front", *argv), env=env, stdout=log, stderr=subprocess.STDOUT,
                                  start_new_session=True)  # fmt: skip
    try:
        began = time.monotonic()
        while "  outputs " not in log_path.read_text(errors="replace"):
            assert served.poll() is None, log_path.read_text(errors="replace")[-5000:]
            assert time.monotonic() - began < 180, log_path.read_text(errors="replace")[-5000:]
            time.sleep(0.3)
        print(f"the fleet started in {time.monotonic() - began:.1f}s")
    finally:
        spaces.run("front", write_sysctl, RANGE, usual)
        for sock in held:
            sock.close()
    fleet_id = control.health()["workers"][0]["actor"].split("-")[2]
    yield {"control": control, "log": log_path, "out": tmp / "out", "process": served}
    served.send_signal(signal.SIGINT)
    try:
        served.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(served.pid, signal.SIGKILL)
    # Both machines share this one's temp directory: what the node that died left there, and the
    # journals every stop keeps, go with the test.
    state = Path(tempfile.gettempdir()) / STATE_DIR
    shutil.rmtree(state / fleet_id, ignore_errors=True)
    shutil.rmtree(state / "journals" / journals_name((tmp / "out").resolve()), ignore_errors=True)
    print(log_path.read_text(errors="replace")[-6000:])
    slow = [call for call in control.calls if call[1] > 5]
    print("control calls over 5 s:", slow)


def _banner_web_ports(log: Path) -> dict[int, int]:
    text = log.read_text(errors="replace")
    return {int(index): int(port) for index, port in
            re.findall(r"^  worker (\d+) .*mitmweb http://[^:]+:(\d+)/", text, re.MULTILINE)}  # fmt: skip


def test_each_worker_picks_its_mitmweb_port_on_its_own_machine(
    fleet: dict[str, Any], spaces: Namespaces
) -> None:
    """`--web-port 0` under `--ray`: every port the front's machine could hand out was busy on the
    node's, yet both workers started, each with a mitmweb that answers on its own machine."""
    control: Control = fleet["control"]
    workers = control.health()["workers"]
    assert sorted(w["host"] for w in workers) == [FRONT, NODE], workers
    ports = _banner_web_ports(fleet["log"])
    assert sorted(ports) == [0, 1], fleet["log"].read_text()[-3000:]
    for worker in workers:
        role = "front" if worker["host"] == FRONT else "node"
        port = ports[worker["index"]]
        if role == "node":
            assert not HELD[0] <= port <= HELD[1]

        def answers(port: int = port) -> int:
            import requests

            with requests.Session() as session:
                session.trust_env = False
                return session.get(f"http://127.0.0.1:{port}/", timeout=10).status_code

        assert spaces.run(role, answers) in (200, 403), (role, port)  # mitmweb (403: it wants its token)


def test_workers_on_another_machine_reach_the_front(
    fleet: dict[str, Any], spaces: Namespaces, shop: str
) -> None:
    """The default `serve --ray` (control port on loopback, no token): an agent beside the node's
    worker sends control requests through its session's address (`webarena-live.invalid`), which the
    worker passes to the front's door for the workers; the session it starts there lets that agent in
    (its address, not the worker's), and the door lets in nothing without the fleet's token."""
    control: Control = fleet["control"]
    text = fleet["log"].read_text(errors="replace")
    door = re.search(rf"workers' door http://{re.escape(FRONT)}:(\d+)/", text)
    assert door is not None, text[-3000:]
    assert f"control API   http://127.0.0.1:{control.url.rsplit(':', 1)[1]}/" in text
    assert control.health()["control_token"] is False  # the workers' token is theirs: the dashboard asks none
    first = control.request("POST", "/sessions", json={"task_id": 1003, "session": "door-a", "near": NODE})
    assert first.status_code == 200, first.text
    opened = first.json()
    assert opened["proxy"].startswith(f"http://{NODE}:") and opened["secret"]
    via_a = opened["proxy"].replace("http://", f"http://door-a:{opened['secret']}@")
    body = {"task_id": 1003, "session": "door-b", "run": "door-b", "near": NODE}

    def agent() -> dict[str, Any]:
        with session_from(AGENT) as session:
            reserved = "http://webarena-live.invalid"
            session.get(f"{shop}/?by=door-a", proxies={"http": via_a}, headers=NAVIGATION, timeout=30)
            started = session.post(f"{reserved}/sessions", json=body, proxies={"http": via_a}, timeout=30)
            assert started.status_code == 200, started.text
            own = {"http": started.json()["proxy"]}  # its bare address: it lets in who opened it
            pages = [session.get(f"{shop}{path}", proxies=own, headers=NAVIGATION, timeout=30).status_code
                     for path in ("/?by=door-b", PRODUCT)]  # fmt: skip
            trace = session.get(f"{reserved}/sessions/door-b/trace", proxies=own, timeout=30)
            if trace.status_code != 200:  # (a 407 when the front took the worker for the agent)
                return {"pages": pages, "trace": trace.status_code}
            finished = session.post(
                f"{reserved}/sessions/door-b/finish", json=NAVIGATED, proxies=own, timeout=60
            )
            urls = [event["url"] for event in trace.json()["events"]]
            return {"pages": pages, "urls": urls, "verdict": finished.json()}

    seen = spaces.run("node", agent)
    assert seen["pages"] == [200, 200], seen
    assert seen["urls"] == [f"{shop}/?by=door-b", f"{shop}{PRODUCT}"]
    assert seen["verdict"]["status"] == "success", seen["verdict"]
    assert control.sessions()["door-b"]["state"] == "finished"
    har = json.loads((fleet["out"] / "door-b" / "1003" / "network.har").read_text())
    assert [e["request"]["url"] for e in har["log"]["entries"]] == seen["urls"]

    def strangers() -> dict[str, Any]:
        import requests

        with requests.Session() as session:
            session.trust_env = False
            refused = session.get(f"http://{FRONT}:{door.group(1)}/sessions", timeout=10)
            try:
                session.get(f"{control.url.replace('127.0.0.1', FRONT)}/health", timeout=10)
                public = "reached"
            except requests.ConnectionError:
                public = "refused"
        return {"door": refused.status_code, "error": refused.json()["error"], "public": public}

    assert spaces.run("node", strangers) == {"door": 403, "error": "not_a_worker", "public": "refused"}
    assert control.finish("door-a", NAVIGATED)["status"] == "failure"  # not the product page
    outside = subprocess.run(["ip", "-o", "addr"], capture_output=True, text=True, timeout=30).stdout
    assert "10.234." not in outside  # the machines' addresses exist only inside their namespaces


def _url(shop: str, agent: Agent, step: int, success: bool) -> str:
    return f"{shop}{PRODUCT}" if step == 4 and success else f"{shop}/?by={agent.session}&step={step}"


def _kill_during_resume(control: Control, log: Path, index: int, pid: int) -> dict[str, float]:
    """SIGKILL worker `index`'s `serve`, then its successor as soon as the front logs the first
    session resumed on it (the next resume in flight); again, up to three rounds, until the front
    logs a resume cut short. Seconds until the worker was back."""
    actor = parent(pid)
    resumed = re.compile(rf"session f\d resumed on worker {index} with".encode())
    for round_ in range(1, 4):
        mark, restarts = len(log.read_bytes()), control.health()["workers"][index]["restarts"]
        serving = [
            child for child in children(actor) if b"serve" in Path(f"/proc/{child}/cmdline").read_bytes()
        ]
        signal_all(serving, signal.SIGKILL)
        began = time.monotonic()
        while not resumed.search(log.read_bytes()[mark:]):
            assert time.monotonic() - began < 60, log.read_text()[-3000:]
            time.sleep(0.005)
        signal_all([child for child in children(actor) if child not in serving], signal.SIGKILL)

        def back_up(wanted: int = restarts + 2) -> bool:
            worker = control.health()["workers"][index]
            return bool(worker["state"] == "up" and worker["restarts"] >= wanted)

        back = control.until(back_up, 90)
        if f"could not be resumed on worker {index}".encode() in log.read_bytes()[mark:]:
            return {"killed in a resume, round": round_, "back after the second kill": back}
    raise AssertionError("no SIGKILL landed during a resume in three rounds")


def test_sixteen_sessions_through_four_faults(
    fleet: dict[str, Any], spaces: Namespaces, shop: str, cluster: dict[str, RayNode]
) -> None:
    """16 sessions (8 on each machine; one a Chromium agent) through: the node's worker SIGSTOPped past
    the fleet's failure detection, then SIGCONT; the front's worker's `serve` SIGKILLed, and again
    while its sessions are being resumed; the node's link down, then up; the node's raylet SIGKILLed.
    Every session ends finished with its planned verdict and every request its agent sent in its HAR,
    or `lost` with the reason (the three still running on the node whose raylet died); none is left
    running; `/health` never took more than 10 s, no other route more than its 30 s."""
    control: Control = fleet["control"]
    log: Path = fleet["log"]
    workers = control.health()["workers"]
    wf = next(w for w in workers if w["host"] == FRONT)
    wn = next(w for w in workers if w["host"] == NODE)
    agents: dict[str, list[Agent]] = {"front": [], "node": []}
    for role, near, count in (("front", FRONT, 8), ("node", NODE, 7)):
        for i in range(count):
            name = f"{role[0]}{i}"
            body = {"task_id": 1003, "session": name, "run": name, "near": near}
            reply = control.request("POST", "/sessions", json=body)
            assert (
                reply.status_code == 200
                and reply.json()["worker"] == (wf if role == "front" else wn)["index"]
            )
            agents[role].append(Agent(name, reply.json()["proxy"]))
    success = {agent.session: i % 2 == 0 for role in agents for i, agent in enumerate(agents[role])}
    pools = {role: spaces.pool(role, 4) for role in agents}

    def steps(role: str, step: int, chosen: list[Agent] | None = None) -> None:
        chosen = agents[role] if chosen is None else chosen
        codes = pools[role].map(lambda a: a.step(_url(shop, a, step, success[a.session])), chosen)
        assert list(codes) == [200] * len(chosen)

    body = {"task_id": 1001, "session": "chromium", "run": "chromium", "near": NODE}
    started = control.request("POST", "/sessions", json=body).json()
    browsed = spaces.run("node", chromium_episode, started["proxy"], started["start_urls"][0], 1001)
    steps("front", 1)
    steps("node", 1)
    timings: dict[str, float] = {}

    # 1. The node's worker (its actor and its `serve`) stopped past the fleet's failure detection.
    stopped = [parent(wn["pid"]), wn["pid"]]
    signal_all(stopped, signal.SIGSTOP)
    began = time.monotonic()
    waiting = pools["node"].submit(agents["node"][0].step, _url(shop, agents["node"][0], 2, True))
    timings["stop known"] = control.until(lambda: control.state_of(wn["index"]) == "unresponsive", 20)
    refused = control.request("GET", "/sessions/n1/trace")
    assert (refused.status_code, refused.json()["error"]) == (503, "worker_unresponsive"), refused.text
    assert refused.json()["worker"] == wn["index"]
    steps("front", 2)  # the other machine's sessions go on
    time.sleep(2)
    signal_all(stopped, signal.SIGCONT)
    timings["stopped for"] = time.monotonic() - began
    timings["answers again"] = control.until(lambda: control.state_of(wn["index"]) == "up", 20)
    assert waiting.result() == 200  # it waited in the kernel's queue, and was captured
    steps("node", 2, agents["node"][1:])
    health = control.health()
    assert health["workers"][wn["index"]]["restarts"] == 0 and health["lost_sessions"] == 0

    # 2. The front's worker's `serve` SIGKILLed, and its successor SIGKILLed while resuming sessions.
    timings.update(_kill_during_resume(control, log, wf["index"], wf["pid"]))
    steps("front", 3)

    # 3. The node's link down past the fleet's failure detection, then up (short of Ray's own).
    spaces.link("node", up=False)
    began = time.monotonic()
    timings["cut known"] = control.until(lambda: control.state_of(wn["index"]) == "unresponsive", 20)
    refused = control.request("GET", "/sessions/n2/trace")
    assert refused.status_code in (503, 504) and refused.json()["worker"] == wn["index"], refused.text
    steps("node", 3)  # its agents and their worker share the machine
    steps("front", 4)
    verdicts = {a.session: control.finish(a.session, NAVIGATED)["status"] for a in agents["front"]}
    time.sleep(max(0.0, 2 - (time.monotonic() - began - timings["cut known"])))
    spaces.link("node", up=True)
    timings["cut for"] = time.monotonic() - began
    timings["back after cut"] = control.until(lambda: control.state_of(wn["index"]) == "up", 30)
    assert control.health()["lost_sessions"] == 0

    # 4. Four of the node's sessions and the Chromium agent's finish; then the node's raylet is killed.
    finishing, running = agents["node"][:4], agents["node"][4:]
    steps("node", 4, finishing)
    verdicts.update({a.session: control.finish(a.session, NAVIGATED)["status"] for a in finishing})
    verdicts["chromium"] = control.finish("chromium", browsed["answer"])["status"]
    (raylet,) = cluster["node"].pids("raylet")
    os.kill(raylet, signal.SIGKILL)
    timings["node loss known"] = control.until(
        lambda: all(control.sessions()[a.session]["state"] == "lost" for a in running), 60
    )
    for pool in pools.values():
        pool.shutdown()

    listed = control.sessions()
    for agent in running:
        assert NODE in listed[agent.session]["reason"] or "node" in listed[agent.session]["reason"]
        gone = control.request("GET", f"/sessions/{agent.session}/trace")
        assert (gone.status_code, gone.json()["error"]) == (410, "session_lost")
    planned = {name: "success" if ok else "failure" for name, ok in success.items()}
    assert verdicts == {**{n: planned[n] for n in verdicts if n != "chromium"}, "chromium": "success"}
    for agent in [*agents["front"], *finishing]:
        assert listed[agent.session]["state"] == "finished"
        har = json.loads((fleet["out"] / agent.session / "1003" / "network.har").read_text())
        assert [e["request"]["url"] for e in har["log"]["entries"]] == agent.sent, agent.session
    har = json.loads((fleet["out"] / "chromium" / "1001" / "network.har").read_text())
    assert set(browsed["requests"]) <= {e["request"]["url"] for e in har["log"]["entries"]}
    assert not [name for name, view in listed.items() if view["state"] not in ("finished", "lost")]
    health_calls = [seconds for what, seconds, _ in control.calls if what == "GET /health"]
    assert max(health_calls) <= 10 and max(seconds for _, seconds, _ in control.calls) <= 35
    print({what: round(seconds, 1) for what, seconds in timings.items()})
