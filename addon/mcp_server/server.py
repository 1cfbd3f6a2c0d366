"""The MCP server of `webarena-live mcp`: the session's tools (`tools.py`) on the `mcp` SDK's
`MCPServer`, over stdio or streamable HTTP.

A refusal (`ToolRefusal`: the control API's words, or this server's) is raised as the SDK's `ToolError`,
which the agent reads as the tool's error; arguments outside the tool's schema (the seed's response
schema for an answer) are refused by the SDK the same way, before anything is sent.
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any

try:
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
except ImportError as error:  # the extra is not installed: one line saying which
    raise ImportError(
        "webarena_live.mcp_server needs the MCP SDK (Python 3.12 or newer): pip install 'webarena-live[mcp]'",
        name=error.name,
    ) from error

from webarena_live.client import AsyncClient
from webarena_live.evaluator import __version__
from webarena_live.mcp_server.tools import Action, AnswerStatus, SessionTools, ToolRefusal, answer_document

INSTRUCTIONS = """\
This server judges your web task live, the way WebArena-Verified judges it. Call get_task first: it
gives the task's intent, the URLs to start from and the proxy address your browser's traffic goes
through. Browse with your browser tools, then call submit_answer once with your final answer; it
finishes the task and answers the verdict. preview_answer and get_progress tell you where you stand
without finishing."""

ANSWER_HELP = (
    "action: 'retrieve' (you read information), 'navigate' (you went to a page) or 'mutate' (you "
    "changed data); status: 'SUCCESS' or the error that stopped you; results: for a retrieve, the "
    "requested values as a list (all of one type), else null; error_details: why, when status is an error"
)


@dataclass(frozen=True)
class Transport:
    """Where the server listens: `stdio`, or streamable HTTP on `host:port` at `path`."""

    kind: str = "stdio"
    host: str = "127.0.0.1"
    port: int = 8000
    path: str = "/mcp"


def build_server(tools: SessionTools) -> MCPServer:
    """An `MCPServer` whose tools act on `tools`' session."""
    server: MCPServer = MCPServer(
        "webarena-live", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING"
    )

    async def get_task() -> dict[str, Any]:
        """Your task: its intent, the start URLs (on the copies of the sites your session leased), the
        sites, and the proxy address your browser must use (every request through it is judged)."""
        return await _answer(tools.task())

    async def submit_answer(
        action: Action,
        status: AnswerStatus,
        results: list[Any] | None = None,
        error_details: str | None = None,
    ) -> dict[str, Any]:
        """Submit your final answer: this finishes the task and answers the verdict (`status`
        success/failure, `score`, each evaluator's details). Call it once, at the end."""
        return await _answer(tools.submit(answer_document(action, status, results, error_details)))

    async def preview_answer(
        action: Action,
        status: AnswerStatus,
        results: list[Any] | None = None,
        error_details: str | None = None,
    ) -> dict[str, Any]:
        """The verdict submit_answer would give now with this answer, without finishing anything."""
        return await _answer(tools.preview(answer_document(action, status, results, error_details)))

    async def get_progress() -> dict[str, Any]:
        """Which of the task's expected requests your browsing has made so far, by which request."""
        return await _answer(tools.progress())

    server.add_tool(get_task, title="Get the task")
    server.add_tool(submit_answer, title="Submit the final answer",
                    description=f"{submit_answer.__doc__} {ANSWER_HELP}")  # fmt: skip
    server.add_tool(preview_answer, title="Preview the verdict",
                    description=f"{preview_answer.__doc__} {ANSWER_HELP}")  # fmt: skip
    server.add_tool(get_progress, title="Get the progress")
    return server


async def _answer(call: Awaitable[dict[str, Any]]) -> dict[str, Any]:
    try:
        return await call
    except ToolRefusal as refusal:
        raise ToolError(str(refusal)) from None


async def serve(
    client: AsyncClient, transport: Transport, *, session: str | None, task_id: int | None,
    start: dict[str, Any],
) -> None:  # fmt: skip
    """Start the session (with `task_id`), then serve its tools until the client goes (stdio) or the
    process is stopped (HTTP). A refused start raises `ToolRefusal` before anything listens."""
    tools = SessionTools(client, session=session, task_id=task_id, start=start)
    await tools.begin()
    server = build_server(tools)
    if transport.kind == "stdio":
        await server.run_stdio_async()
    else:
        await server.run_streamable_http_async(
            host=transport.host, port=transport.port, streamable_http_path=transport.path
        )
