"""A `reset_url` that keeps the data is refused at start. WebArena-Verified's env-ctrl `/restart` restarts
the site's services and keeps its data (the test image's env-ctrl does the same): the site map the guide
described before container copies (each copy's `reset_url` its env-ctrl `/restart`) would lease a changed
copy with the change still in it, so `serve` refuses it, saying what to use instead."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import requests

from scripts.support.reset_endpoint import ResetEndpoint
from tests.containers.sessions import TASKS, write_map
from tests.site.harness import free_port
from tests.support.engines import SHOPPING, Engine, ulimits
from tests.support.serve_process import wait_until
from webarena_live.evaluator import SiteMap
from webarena_live.replicas.reset import keeps_data_problems

CLI = Path(sys.executable).parent / "webarena-live"


def hand_made_copy(engine: Engine, name: str) -> tuple[str, str]:
    """A copy as a user's `docker run` line makes one: its site's and its env-ctrl's URLs."""
    site, ctrl = free_port(), free_port()
    engine.client().containers.run(
        SHOPPING, name=name, detach=True, ulimits=ulimits(),
        ports={"80/tcp": ("127.0.0.1", site), "8877/tcp": ("127.0.0.1", ctrl)},
        environment={"WA_ENV_CTRL_EXTERNAL_SITE_URL": f"http://127.0.0.1:{site}"},
    )  # fmt: skip
    urls = f"http://127.0.0.1:{site}", f"http://127.0.0.1:{ctrl}"
    wait_until("the copy answers", lambda: _answers(f"{urls[1]}/status"))
    return urls


def _answers(url: str) -> bool:
    try:
        return requests.get(url, timeout=5).json().get("success") is True
    except (requests.RequestException, ValueError):
        return False


def serve_refusal(tmp_path: Path, config: Path) -> subprocess.CompletedProcess[str]:
    ports = [
        arg for flag in ("--port", "--session-port", "--control-port") for arg in (flag, str(free_port()))
    ]
    return subprocess.run(
        [str(CLI), "serve", "--tasks", str(TASKS), "--config", str(config), "--isolation=exclusive", *ports],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip


def test_the_env_ctrl_restart_keeps_the_change_so_a_map_naming_it_as_the_reset_is_refused(
    tmp_path: Path, engine: Engine
) -> None:
    copies = [hand_made_copy(engine, f"by-hand-{n}") for n in range(2)]
    # what the refused map would have done: the "reset" answers success, and the change is still there
    site, ctrl = copies[0]
    assert requests.post(f"{site}/order", data={"name": "restart-order"}, timeout=30).status_code == 200
    restarted = requests.post(f"{ctrl}/restart?wait=1", timeout=60)
    assert restarted.status_code == 200 and restarted.json()["success"] is True
    wait_until("the site is back", lambda: _answers(f"{ctrl}/status"))
    assert requests.get(f"{site}/orders", timeout=30).json()["orders"] == ["seed-order", "restart-order"]
    replicas = [{"urls": [s], "reset_url": f"{c}/restart"} for s, c in copies]
    config = write_map(tmp_path / "map.json", {"__SHOPPING__": {"replicas": replicas}})
    done = serve_refusal(tmp_path, config)
    assert done.returncode != 0, done.stdout
    lines = [line for line in done.stderr.splitlines() if "environment-control server" in line]
    assert len(lines) == 2, done.stderr  # one line per copy
    assert "keep its data" in lines[0] and '"image" and "replicas"' in lines[0], lines[0]


def test_a_reset_url_on_an_env_ctrl_server_at_another_path_is_refused_by_its_answer(
    tmp_path: Path, engine: Engine
) -> None:
    site, ctrl = hand_made_copy(engine, "by-hand")
    config = write_map(
        tmp_path / "map.json", {"__SHOPPING__": {"urls": [site], "reset_url": f"{ctrl}/reset"}}
    )
    done = serve_refusal(tmp_path, config)
    assert done.returncode != 0 and "its /status answers as env-ctrl's" in done.stderr, done.stderr


def test_a_real_reset_endpoint_passes() -> None:
    endpoint = ResetEndpoint()
    threading.Thread(target=endpoint.serve_forever, daemon=True).start()
    try:
        site_map = SiteMap.from_dict(
            {"environments": {"__SHOPPING__": {"urls": ["http://127.0.0.1:1"], "reset_url": endpoint.url}}}
        )
        assert keeps_data_problems(site_map) == []
        restart = "http://127.0.0.1:1/restart"
        on_restart = {
            "environments": {"__SHOPPING__": {"urls": ["http://127.0.0.1:1"], "reset_url": restart}}
        }
        (line,) = keeps_data_problems(SiteMap.from_dict(on_restart))
        assert line.startswith(f"__SHOPPING__ replica 0: reset_url {restart} is a WebArena-Verified")
    finally:
        endpoint.shutdown()
        endpoint.server_close()
