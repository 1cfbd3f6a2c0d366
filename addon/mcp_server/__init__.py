"""webarena-live as an MCP server (`webarena-live mcp`): an agent's own view of its session.

An MCP client that browses through a browser server (Playwright MCP, chrome-devtools-mcp) adds this
server beside it and is judged live with nothing written by hand: the agent reads its task, browses
through the session's proxy address, and submits its final answer, which finishes the session. The
tools (`tools.py`) are a client of the control API (`webarena_live.client`), the server (`server.py`)
is the `mcp` SDK's (`pip install 'webarena-live[mcp]'`, Python 3.12 or newer).
"""

from __future__ import annotations

from webarena_live.mcp_server.tools import SessionTools

__all__ = ["SessionTools"]
