"""webarena-live as an MCP server (`webarena-live mcp`): an agent's own view of its session.

An MCP client that browses through a browser server (Playwright MCP, chrome-devtools-mcp) adds this
server beside it and is judged live with nothing written by hand: the agent reads its task, browses
through the session's proxy address, and submits its final answer, which finishes the session. The
tools (`tools.py`) are a client of the control API (`webarena_live.client`), the server (`server.py`)
is the `mcp` SDK's (`pip install 'webarena-live[mcp]'`, Python 3.12 or newer). docs/guides/any-language.md.

Owns the MCP face of one session: what its tools do (`tools`: the task's view, the answer in the seed's
fields, the control API's refusals as the agent reads them) and the server that declares them over stdio
or streamable HTTP (`server`). May import the client, the evaluator's exported names and the `mcp` SDK;
never the server's parts (pyproject.toml, [tool.importlinter]). Only `server` imports the SDK, so the
tools import without it.
"""

from __future__ import annotations

from webarena_live.mcp_server.tools import SessionTools

__all__ = ["SessionTools"]
