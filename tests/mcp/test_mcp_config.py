"""The guide's MCP client configuration run as written: Playwright MCP (`@playwright/mcp` from npm, on
Debian's Chromium) and `webarena-live mcp` started from it by the MCP SDK's own client, an agent getting
its task from one and browsing with the other — a right run, then on the same browser a wrong one of the
next attempt — each judged live through the proxy port as the guide says."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from tests.mcp.agent import TOKEN, answer
from tests.support.guide_serve import example
from tests.support.serve_process import Served
from webarena_live.client import TOKEN_ENV

pytestmark = pytest.mark.timeout(600)

NAVIGATED = {"action": "navigate", "status": "SUCCESS", "results": None}
BROWSER_SERVER = "@playwright/mcp@"
"""The guide's browser server, from npm (it launches Debian's Chromium)."""


def configured(served: Served, cwd: Path) -> dict[str, StdioServerParameters]:
    """The guide's servers, its proxy port swapped for the test's, the control API and its token named
    in their environment (as a client's `env` would), this venv's `webarena-live` first on PATH, run in
    `cwd` (Playwright MCP writes its snapshots' files there)."""
    block = example("mcp-config").replace("127.0.0.1:8080", f"127.0.0.1:{served.proxy_port}")
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    env = {"PATH": path, "WEBARENA_LIVE_CONTROL": served.control, TOKEN_ENV: TOKEN}
    servers = {}
    for name, server in json.loads(block)["mcpServers"].items():
        command = shutil.which(server["command"], path=path)
        assert command, f"{server['command']} is not installed (scripts/install_test_apps.sh installs Node)"
        servers[name] = StdioServerParameters(command=command, args=server["args"], env=env, cwd=cwd)
    return servers


async def episode(browser: Client, judge: StdioServerParameters, link: str) -> dict[str, Any]:
    """One task: its view from webarena-live, the start page and a click on `link` in the browser
    server, the final answer: the verdict."""
    async with Client(judge) as live:
        task = answer(await live.call_tool("get_task", {}))
        page = await browser.call_tool("browser_navigate", {"url": task["start_urls"][0]})
        assert not page.is_error, page.content
        page = await browser.call_tool("browser_snapshot", {})
        snapshot = page.content[0].text  # type: ignore[union-attr]
        ref = re.search(rf'link "{re.escape(link)}"[^\n]*\[ref=(\w+)\]', snapshot)
        assert ref, snapshot[-3000:]
        clicked = await browser.call_tool(
            "browser_click", {"element": f"{link} link", "target": ref.group(1)}
        )
        assert not clicked.is_error, clicked.content
        return answer(await live.call_tool("submit_answer", NAVIGATED))


def test_the_guides_mcp_configuration_runs_as_written(served: tuple[Served, Path], tmp_path: Path) -> None:
    server, _ = served
    servers = configured(server, tmp_path)
    assert any(arg.startswith(BROWSER_SERVER) for arg in servers["browser"].args), servers["browser"]

    async def agent() -> tuple[dict[str, Any], dict[str, Any]]:
        async with Client(servers["browser"], read_timeout_seconds=120) as browser:
            right = await episode(browser, servers["webarena-live"], "Enamel Camp Mug")
            wrong = await episode(browser, servers["webarena-live"], "Stoneware Coffee Mug 12 oz")
        return right, wrong

    right, wrong = asyncio.run(agent())
    assert (right["task_id"], right["status"], right["score"]) == (1003, "success", 1.0), right
    assert (wrong["task_id"], wrong["status"], wrong["score"]) == (1003, "failure", 0.0), wrong
