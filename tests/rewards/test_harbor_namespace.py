"""The exported Harbor task run as Harbor runs it, with no container runtime: a network namespace plays
the container. `serve` runs in a namespace of its own ("host") listening on its veth address, with
`--advertise-host` that address; the task's scripts (`environment/start_session.sh`, an agent that
browses through the proxy with curl, the task's test script `test.sh` → `webarena-live verify`) run in
the other ("container"), which reaches nothing but that address: the demo shop listens on the host namespace's
loopback, so every page the agent sees came through the proxy. The container's `webarena-live` is this
venv's (on PATH), not one installed from the exported wheel: the test downloads nothing.

Also `--advertise-host` itself: checked as a hostname or IP address, passed to every worker.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.netns import Namespaces
from tests.support.rewards import PLANS
from tests.support.serve_process import NAVIGATION, Served
from webarena_live.commands.serve_workers import worker_args
from webarena_live.demo import site as demo_site
from webarena_live.proxy.options import advertise_host_problem, options_from_flags, with_flags

CLI = Path(sys.executable).with_name("webarena-live")
HOST, CONTAINER = "10.231.40.1", "10.231.40.2"
TOKEN = "harbor-netns-token"


@pytest.mark.parametrize("host", ["host.docker.internal", "172.17.0.1", "localhost", "fd00::1", "a-b.c9"])
def test_an_advertised_host_is_a_hostname_or_an_ip_address(host: str) -> None:
    assert advertise_host_problem(host) is None


@pytest.mark.parametrize("host", ["http://x", "a b", "-x.org", "x..org", "1.2.3.4.5", "999.1.1.1", "h:80"])
def test_a_bad_advertised_host_is_named(host: str) -> None:
    assert advertise_host_problem(host) == f"{host!r} is not a hostname or an IP address"


def test_an_unspecified_address_is_refused() -> None:
    assert "names no host a client can reach" in (advertise_host_problem("0.0.0.0") or "")


def test_the_flag_sets_the_option_and_every_worker_gets_it() -> None:
    flags = {option.flag: option for option in with_flags()}
    assert flags["advertise-host"].name == "webarena_advertise_host"
    args = argparse.Namespace(**{option.dest: None for option in with_flags() if option.dest})
    assert options_from_flags(args)["webarena_advertise_host"] == ""
    args.advertise_host = "host.docker.internal"
    assert options_from_flags(args)["webarena_advertise_host"] == "host.docker.internal"
    args.listen_host, args.quiet, args.gc_tuning, args.mitmproxy_options = "0.0.0.0", False, True, []
    argv = worker_args(args, 0, "127.0.0.1:8081")
    assert argv[argv.index("--advertise-host") + 1] == "host.docker.internal"


def test_serve_refuses_a_bad_advertised_host_in_one_line(tmp_path: Path) -> None:
    done = subprocess.run([str(CLI), "serve", "--advertise-host", "http://host:8080"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 2
    assert (
        done.stderr
        == "webarena-live serve: --advertise-host: 'http://host:8080' is not a hostname or an IP address\n"
    )


def test_ray_workers_refuse_one_advertised_host(tmp_path: Path) -> None:
    """Ray workers are on machines of their own: one advertised host cannot name them all (refused
    before Ray is contacted: the address names nothing listening)."""
    ports = ["--port", "0", "--session-port", "0", "--control-port", "0"]
    done = subprocess.run([str(CLI), "serve", "--workers", "2", "--ray", "127.0.0.1:1", "--advertise-host",
                           "host.docker.internal", *ports],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 2
    assert done.stderr == (
        "webarena-live serve: --advertise-host names one host; with --ray each worker's sessions are on its "
        "own node\n"
    )


@pytest.fixture()
def namespaces() -> Iterator[Namespaces]:
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root (CI runs as root)")
    made = Namespaces(["host", "container"], [("host", HOST, "container", CONTAINER)])
    try:
        yield made
    finally:
        made.remove()


def test_the_exported_task_runs_in_a_namespace_playing_the_container(
    namespaces: Namespaces, tmp_path: Path
) -> None:
    export = subprocess.run([str(CLI), "export", "harbor", "--out", str(tmp_path / "tasks"), "--task-ids",
                             "1001", "--control", "http://unused.invalid:1"],
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    assert export.returncode == 0, export.stderr
    folder = tmp_path / "tasks" / "webarena-live-1001"
    shop = namespaces.run("host", demo_site.serve, "127.0.0.1", 0)  # only the host namespace reaches it
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"environments": {"__SHOPPING__": {"urls": [shop.url]}}}))
    env = {"XDG_STATE_HOME": str(tmp_path / "state"), "WEBARENA_LIVE_CONTROL_TOKEN": TOKEN}
    # listening everywhere in the host namespace: without --advertise-host the answer would be loopback
    served = namespaces.run("host", lambda: Served(
        "--config", str(config), "--set", f"confdir={tmp_path / 'conf'}",
        "--output-dir", str(tmp_path / "out"),
        "--listen-host", "0.0.0.0", "--control-host", "0.0.0.0", "--advertise-host", HOST,
        host=HOST, cwd=tmp_path, env=env,
    ))  # fmt: skip
    try:
        namespaces.run("host", served.start)
        for name, plan in (("right", PLANS["retrieve-right"]), ("wrong", PLANS["retrieve-wrong"])):
            trial = tmp_path / name
            env = {
                "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",  # the venv's webarena-live, python3
                "HOME": str(tmp_path),
                "WEBARENA_LIVE_CONTROL": served.control_url,
                "WEBARENA_LIVE_CONTROL_TOKEN": TOKEN,
                "WEBARENA_LIVE_SESSION_FILE": str(trial / "session.json"),
                "WEBARENA_LIVE_ANSWER": str(trial / "agent" / "answer.json"),
                "WEBARENA_LIVE_VERIFIER_DIR": str(trial / "verifier"),
            }

            def in_container(*command: str, env: dict[str, str] = env) -> subprocess.CompletedProcess[str]:
                return namespaces.run("container", subprocess.run, list(command), env=env,
                                      capture_output=True, text=True, timeout=120)  # fmt: skip

            started = in_container("bash", str(folder / "environment" / "start_session.sh"))
            assert started.returncode == 0, started.stderr
            session = json.loads((trial / "session.json").read_text())
            assert session["proxy"].startswith(f"http://{HOST}:")  # the advertised address, reachable here
            pac = in_container("curl", "-fsS", "-H", f"Authorization: Bearer {TOKEN}",
                               f"{served.control_url}/sessions/{session['session']}/proxy.pac")  # fmt: skip
            assert f"PROXY {session['proxy'].removeprefix('http://')}" in pac.stdout, pac.stderr
            # the container reaches the shop only through the proxy
            assert in_container("curl", "-fsS", "-m", "5", shop.url).returncode != 0
            headers = [arg for key, value in NAVIGATION.items() for arg in ("-H", f"{key}: {value}")]
            for path in plan.paths:  # the agent step
                page = in_container("curl", "-fsS", "-x", session["proxy"], *headers, f"{shop.url}{path}")
                assert page.returncode == 0, page.stderr
            (trial / "agent").mkdir()
            (trial / "agent" / "answer.json").write_text(json.dumps(plan.answer))
            verified = in_container("bash", str(folder / "tests" / "test.sh"))
            assert verified.returncode == 0, verified.stderr
            assert (trial / "verifier" / "reward.txt").read_text() == f"{plan.score:g}\n"
            result = json.loads((trial / "verifier" / "eval_result.json").read_text())
            assert result["score"] == plan.score
    finally:
        namespaces.run("host", served.stop)
        namespaces.run("host", shop.shutdown)
