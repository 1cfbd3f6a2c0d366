"""An agent on `webarena-live mcp`, as any MCP client drives it: the MCP SDK's own `Client`, over stdio
(the client spawns the command) or streamable HTTP (the command runs on its own), its browsing plain HTTP
through the proxy address the server's `get_task` gives."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import requests
from mcp import Client, StdioServerParameters
from mcp.types import CallToolResult

from tests.support.serve_process import NAVIGATION
from webarena_live.client import TOKEN_ENV
from webarena_live.launch import free_ports

COMMAND = str(Path(sys.executable).parent / "webarena-live")
TOKEN = "mcp-test-token"
"""The control token the tests' `serve` requires, read by `webarena-live mcp` from the environment."""
TOOLS = {"get_task", "submit_answer", "preview_answer", "get_progress"}


def stdio(control: str, *args: str, token: str | None = TOKEN) -> StdioServerParameters:
    """`webarena-live mcp --control CONTROL ARGS` as an MCP client's configuration starts it."""
    env = {TOKEN_ENV: token} if token else {}
    return StdioServerParameters(command=COMMAND, args=["mcp", "--control", control, *args], env=env)


@contextmanager
def http_server(control: str, *args: str) -> Iterator[str]:
    """`webarena-live mcp --transport http` on a free port, running: its endpoint's URL."""
    (port,) = free_ports(1)
    command = [COMMAND, "mcp", "--transport", "http", "--port", str(port), "--control", control, *args]
    env = {**_environment(), TOKEN_ENV: TOKEN}
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, process.communicate()[0]
            try:
                requests.get(f"http://127.0.0.1:{port}/mcp", timeout=1)
                break
            except requests.ConnectionError:
                assert time.monotonic() < deadline, "webarena-live mcp --transport http did not listen"
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=30)


def _environment() -> dict[str, str]:
    import os

    return {key: value for key, value in os.environ.items() if key != TOKEN_ENV}


def answer(result: CallToolResult) -> dict[str, Any]:
    """A tool's answer, which must not be an error."""
    assert not result.is_error, result.content
    assert result.structured_content is not None, result.content
    found: dict[str, Any] = result.structured_content
    # the same document as text, for clients that read only the content
    assert json.loads(result.content[0].text) == found  # type: ignore[union-attr]
    return found


def refusal(result: CallToolResult) -> str:
    """A tool's error: its text."""
    assert result.is_error, result.structured_content
    text: str = result.content[0].text  # type: ignore[union-attr]
    return text


def browse(proxy: str, url: str) -> None:
    """One navigation through the session's proxy address, as a browser's would be counted."""
    reply = requests.get(url, proxies={"http": proxy}, headers=NAVIGATION, timeout=30)
    assert reply.status_code == 200, (url, reply.status_code)


async def whole_run(
    server: StdioServerParameters | str, paths: tuple[str, ...], final: dict[str, Any]
) -> dict:
    """An agent's episode over the server: its task, its pages, a preview and its progress, its final
    answer; then another answer, which the judged session refuses. Each step's answer, by name."""
    async with Client(server) as client:
        assert {tool.name for tool in (await client.list_tools()).tools} == TOOLS
        task = answer(await client.call_tool("get_task", {}))
        for path in paths:
            browse(task["proxy"], task["start_urls"][0].rstrip("/") + path)
        preview = answer(await client.call_tool("preview_answer", final))
        progress = answer(await client.call_tool("get_progress", {}))
        verdict = answer(await client.call_tool("submit_answer", final))
        other = {**final, "status": "UNKNOWN_ERROR", "error_details": "changed my mind"}
        again = refusal(await client.call_tool("submit_answer", other))
    return {"task": task, "preview": preview, "progress": progress, "verdict": verdict, "again": again}
