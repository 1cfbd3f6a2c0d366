"""The guide's MCP browser server recipes run as written: `@playwright/mcp` and `chrome-devtools-mcp`
from npm (the versions `.npm-tools/package.json` pins, installed by scripts/bootstrap.sh), each driven by
the guide's client on the real `mcp` SDK (in its own venv, `.venv-mcp`) through one session address for
two tasks in a row on one browser: the browser server started once, its proxy fixed at its start, the
address passing from the first session to the second (`--session-ports P-P`). Both tasks are judged
live and by the reference on the files the finishes wrote. Before the address took its kept connections
along (`ClientConnections.session_of`), the second task's first page was answered `410 Gone` by the first.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.site.harness import oracle_dataset, oracle_verdicts, write_config
from tests.support.guide_serve import Terminal, example, serving, this_environment
from tests.support.paths import REPO
from tests.support.serve_process import free_range
from webarena_live.evaluator import default_tasks_path
from webarena_live.launch import free_ports

pytestmark = pytest.mark.timeout(400)

NPM_TOOLS = REPO / ".npm-tools"
MCP_PYTHON = REPO / ".venv-mcp" / "bin" / "python"
"""The client's venv (mcp 2.3.0 does not sit with mitmproxy 11's h11 pin): scripts/bootstrap.sh fills it."""
SERVERS = {"playwright": "mcp-config-playwright", "devtools": "mcp-config-devtools"}
SESSIONS = {"playwright": "playwright-mcp", "devtools": "chrome-devtools-mcp"}


@pytest.fixture(scope="module")
def guide(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Terminal]:
    assert (NPM_TOOLS / "node_modules" / "@playwright" / "mcp").is_dir(), (
        "the MCP browser servers are missing: scripts/bootstrap.sh installs them (npm ci in .npm-tools)"
    )
    assert MCP_PYTHON.exists(), "the MCP client's venv is missing: scripts/bootstrap.sh makes .venv-mcp"
    # The guide's serve block, its ports swapped for free ones (8090: the one session address).
    ports = dict(zip(("7770", "8080", "8081", "8082"), map(str, free_ports(4)), strict=True))
    ports["8090"] = str(free_range(1))
    env = this_environment(npm_config_offline="true")  # the pinned packages only, no download
    guide = Terminal(tmp_path_factory.mktemp("mcp"), ports, env)
    for name in ("node_modules", "package.json"):  # as a user's project holding the servers: npx finds them
        (guide.workdir / name).symlink_to(NPM_TOOLS / name)
    with serving(guide, example("serve-one-address")):
        yield guide


@pytest.mark.parametrize("server", sorted(SERVERS))
def test_an_mcp_browser_server_does_two_tasks_in_a_row_on_one_browser(
    guide: Terminal, server: str, oracle_python: Path, official_dataset: Path
) -> None:
    config = guide.workdir / f"mcp-{server}.json"
    config.write_text(guide.swap(example(SERVERS[server])))
    assert "/usr/bin/chromium" in json.loads(config.read_text())["mcpServers"]["browser"]["args"]
    agent = guide.workdir / "mcp_agent.py"
    agent.write_text(guide.swap(example("mcp-client")))
    done = subprocess.run(
        [str(MCP_PYTHON), str(agent), str(config)], cwd=guide.workdir, env=guide.env,
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr[-5000:]}"
    assert done.stdout.split("\n")[-3:] == ["1003 success 1.0", "1002 success 1.0", ""], done.stdout

    # The reference agrees, on the files each finish wrote (the second task: all of it captured).
    control = f"http://127.0.0.1:{guide.ports['8081']}"
    judged = guide.workdir / f"judged-{server}"
    for number in (1, 2):
        view = requests.get(f"{control}/sessions/{SESSIONS[server]}-{number}", timeout=10).json()
        assert "late_events" not in view and view["counts"]["navigation"] >= 1, view
        folder = Path(view["outputs"]["eval_result.json"]).parent
        target = judged / folder.name
        target.mkdir(parents=True)
        for name in ("agent_response.json", "network.har"):
            (target / name).write_bytes((folder / name).read_bytes())
    dataset = oracle_dataset(official_dataset, default_tasks_path(), guide.workdir / f"dataset-{server}.json")
    shop = f"http://127.0.0.1:{guide.ports['7770']}"
    sites = write_config(guide.workdir / f"oracle-{server}.json", {"__SHOPPING__": {"urls": [shop]}},
                         test_data_file=dataset)  # fmt: skip
    verdicts = oracle_verdicts(oracle_python, judged, sites)
    assert {task: found["status"] for task, found in verdicts.items()} == {1003: "success", 1002: "success"}
