"""A real control port for tests: uvicorn in the test's event loop on 127.0.0.1, and raw HTTP reads."""

from __future__ import annotations

import asyncio
import signal

from tests.support.addon_helpers import SHOP, make_flow, write_tasks
from webarena_live.control.app import create_app
from webarena_live.control.context import ControlContext
from webarena_live.control.server import ControlServer
from webarena_live.evaluator.tasks import load_tasks
from webarena_live.proxy.capture import event_from_flow
from webarena_live.runs.sessions import SessionStore


def make_context(tmp_path) -> ControlContext:
    tasks = load_tasks(write_tasks(tmp_path))
    return ControlContext(tasks=tasks, sessions=SessionStore())  # no site map: unrendered


async def read_response(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return status, headers, body


async def read_until(reader: asyncio.StreamReader, needle: bytes) -> bytes:
    """Read the stream until `needle` has arrived (chunked framing and all)."""
    seen = b""
    while needle not in seen:
        chunk = await reader.read(4096)
        assert chunk, f"stream ended before {needle!r}"
        seen += chunk
    return seen


def context_of(server: ControlServer) -> ControlContext:
    return server.app.state.control  # type: ignore[no-any-return]


def finished_session(ctx: ControlContext) -> None:
    session = ctx.sessions.start("done", ctx.tasks[9001])
    session.append(event_from_flow(make_flow(url=f"{SHOP}/x")))
    assert session.finish({"task_type": "navigate", "status": "SUCCESS"}).result.status.value


def serve(tmp_path, scenario) -> None:
    async def main() -> None:
        handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
        server = ControlServer(create_app(make_context(tmp_path)), host="127.0.0.1", port=0)
        await server.start()
        assert server.port  # port 0: the real one is known
        # The host process (webarena-live serve, mitmdump) keeps its signal handlers.
        assert {signum: signal.getsignal(signum) for signum in handlers} == handlers
        try:
            await asyncio.wait_for(scenario(server), timeout=30)
        finally:
            await server.stop()

    asyncio.run(main())
