"""The official dataset guide's "Copies as containers" runs as written, against the test image tagged
with the official shop's name: its site map (the engine and free ports swapped in), `sites up`, `serve`
(the test's own tasks instead of the official ones, whose shop is Magento), a writer's session, the next
session on the same copy reading the seeded state, and `serve`'s exit removing the copies."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from tests.containers.sessions import READ, SEEDED, TASKS, WRITE, run_agent, settled
from tests.site.harness import free_port
from tests.support.engines import Engine
from tests.support.paths import REPO
from tests.support.serve_process import wait_until

GUIDE = REPO / "docs" / "guides" / "official-dataset.md"


def block(name: str) -> str:
    (found,) = re.findall(rf"<!-- example: {name} -->\n```\w*\n(.*?)```", GUIDE.read_text(), re.S)
    return found


def run(script: str, workdir: Path, env: dict[str, str]) -> str:
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=workdir, env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, f"{script}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_the_guides_copies_run_as_written(tmp_path: Path, engine: Engine) -> None:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "XDG_STATE_HOME": str(tmp_path / "state")}  # fmt: skip
    site_map = json.loads(block("sites-map"))
    entry = site_map["environments"]["__SHOPPING__"]
    port = free_port()
    entry.update(engines=[engine.url], host_port=port, env_ctrl_host_port=port + 1, port_stride=2)
    (tmp_path / "sites.json").write_text(json.dumps(site_map))
    made = run(block("sites-up"), tmp_path, env)
    assert made.count("running (fresh)") == entry["replicas"] + entry["spares"], made
    ids = sorted(c.id for c in engine.client().containers.list())
    ports = {flag: free_port() for flag in ("--port", "--control-port", "--session-port")}
    serve = block("sites-serve").strip().replace("--tasks webarena-verified", f"--tasks {TASKS}")
    serve += (
        "".join(f" {flag} {port}" for flag, port in ports.items()) + f" --set confdir={tmp_path / 'conf'}"
    )
    server = subprocess.Popen(["bash", "-c", f"exec {serve}"], cwd=tmp_path, env=env, start_new_session=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
    control = f"http://127.0.0.1:{ports['--control-port']}"
    try:
        wait_until("serve answers", lambda: _up(control, server))
        wait_until("the copies adopted", lambda: settled(control))
        assert sorted(c.id for c in engine.client().containers.list()) == ids, "adopted, not made again"
        writer = run_agent(control, WRITE, "writer")
        assert writer.result["status"] == "success" and writer.orders == SEEDED
        wait_until("the writer's copy made new", lambda: settled(control))
        reader = run_agent(control, READ, "reader")
        assert reader.copy_url == writer.copy_url, "the next session on the same copy"
        assert reader.container != writer.container and reader.orders == SEEDED
        assert reader.result["status"] == "success"
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        output = server.communicate(timeout=120)[0]
    assert engine.container_names() == [], output  # serve removed its copies at exit
    assert run(block("sites-down"), tmp_path, env).strip() == "nothing to remove"
    assert (tmp_path / "out" / str(WRITE) / "eval_result.json").exists()


def _up(control: str, server: subprocess.Popen[str]) -> bool:
    if server.poll() is not None:
        pytest.fail(f"serve exited: {server.communicate()[0]}")
    try:
        return requests.get(f"{control}/health", timeout=2).ok
    except requests.RequestException:
        return False
