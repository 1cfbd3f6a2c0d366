"""The control port: uvicorn in the test's event loop, real sockets on 127.0.0.1, real streaming."""

from __future__ import annotations

import asyncio
import json

from tests.support.addon_helpers import SHOP, browser_headers, make_flow
from tests.support.control_server import (
    context_of,
    finished_session,
    make_context,
    read_response,
    read_until,
    serve,
)
from webarena_live.control import middleware as api_middleware
from webarena_live.control.app import create_app
from webarena_live.control.server import ControlServer
from webarena_live.proxy.capture import event_from_flow


def test_keep_alive_serves_several_requests_on_one_connection(tmp_path):
    async def scenario(server: ControlServer) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET /tasks/9003 HTTP/1.1\r\nHost: x\r\n\r\n")
        first = await read_response(reader)
        second = await read_response(reader)
        assert first[0] == 200 and json.loads(first[2])["status"] == "ok"
        assert "access-control-allow-origin" not in first[1]  # no web page may read the control API
        assert second[0] == 200 and json.loads(second[2])["task_id"] == 9003
        body = b'{"task_id": 9001, "session": "s"}'
        head = b"POST /sessions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body)
        writer.write(head + body)
        status, _, answer = await read_response(reader)
        assert status == 200 and json.loads(answer)["session"] == "s"
        writer.close()

    serve(tmp_path, scenario)


def test_event_stream_pushes_events_as_they_are_captured(tmp_path):
    async def scenario(server: ControlServer) -> None:
        session = context_of(server).sessions.get_or_create("live")
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"GET /sessions/live/events HTTP/1.1\r\nHost: x\r\n\r\n")
        head = await reader.readuntil(b"\r\n\r\n")
        assert b"text/event-stream" in head and b"chunked" in head.lower()
        await read_until(reader, b"event: session")
        assert context_of(server).sessions.notices.count("live") == 1
        for path in ("/one", "/two"):
            flow = make_flow(url=f"{SHOP}{path}", headers=browser_headers(navigate=True))
            session.append(event_from_flow(flow))
            await read_until(reader, f"{SHOP}{path}".encode())
        writer.close()
        for _ in range(100):  # the server notices the hang-up and unsubscribes
            if not context_of(server).sessions.notices.count("live"):
                break
            await asyncio.sleep(0.02)
        assert context_of(server).sessions.notices.count("live") == 0

    serve(tmp_path, scenario)


def test_stream_of_a_finished_session_replays_and_ends(tmp_path):
    async def scenario(server: ControlServer) -> None:
        finished_session(context_of(server))
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"GET /sessions/done/events HTTP/1.1\r\nHost: x\r\n\r\n")
        everything = await reader.read()  # the server ends the stream itself
        assert b"event: finished" in everything and f"{SHOP}/x".encode() in everything
        writer.close()

    serve(tmp_path, scenario)


def test_oversized_and_malformed_requests_do_not_take_the_server_down(tmp_path, monkeypatch):
    monkeypatch.setattr(api_middleware, "MAX_CONTROL_BODY", 10)

    async def scenario(server: ControlServer) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"POST /sessions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n" + b"x" * 100)
        status, _, body = await read_response(reader)
        assert status == 413 and json.loads(body)["error"] == "too_large"
        writer.close()
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"NONSENSE\r\n\r\n")
        # no request line: answered 400 and closed (the next connection is served as ever)
        answer = await asyncio.wait_for(reader.read(), 5)
        assert answer.startswith(b"HTTP/1.1 400 ") and reader.at_eof(), answer
        writer.close()
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert (await read_response(reader))[0] == 200
        writer.close()

    serve(tmp_path, scenario)


def test_cors_preflight_is_refused(tmp_path):
    async def scenario(server: ControlServer) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"OPTIONS /sessions HTTP/1.1\r\nHost: x\r\nOrigin: http://a\r\n\r\n")
        status, headers, body = await read_response(reader)
        assert status == 403 and json.loads(body)["error"] == "page_request_refused"
        assert "access-control-allow-methods" not in headers
        writer.close()

    serve(tmp_path, scenario)


def test_a_20_mib_body_gets_the_json_413_not_a_reset(tmp_path):
    """The client is still writing when the server decides: the body is drained, then answered."""

    async def scenario(server: ControlServer) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        size = 20 * 1024 * 1024
        writer.write(
            f"POST /sessions/x/finish HTTP/1.1\r\nHost: x\r\nContent-Length: {size}\r\n\r\n".encode()
        )
        chunk = b"x" * (1024 * 1024)
        for _ in range(size // len(chunk)):
            writer.write(chunk)
            await writer.drain()  # raises ConnectionResetError if the server hung up early
        head = await reader.readuntil(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 413 Content Too Large\r\n") or head.startswith(
            b"HTTP/1.1 413 Request Entity Too Large\r\n"
        ), head
        length = int(
            next(line for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))[15:]
        )
        assert json.loads(await reader.readexactly(length))["error"] == "too_large"
        writer.close()

    serve(tmp_path, scenario)


def test_answers_carry_a_reason_phrase(tmp_path):
    async def scenario(server: ControlServer) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n")
        head = await reader.readuntil(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 404 Not Found\r\n"), head
        writer.close()

    serve(tmp_path, scenario)


def test_an_event_source_reconnecting_after_the_finish_is_told_to_stop(tmp_path):
    """A browser's EventSource reconnects whenever a stream ends; after the finish it gets a 204."""

    async def scenario(server: ControlServer) -> None:
        finished_session(context_of(server))
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"GET /sessions/done/events HTTP/1.1\r\nHost: x\r\nLast-Event-ID: 0\r\n\r\n")
        status, headers, body = await read_response(reader)
        assert (status, body) == (204, b"") and "content-length" not in headers
        writer.close()

    serve(tmp_path, scenario)


def test_the_global_stream_tells_every_sessions_notices(tmp_path):
    async def scenario(server: ControlServer) -> None:
        ctx = context_of(server)
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"GET /events HTTP/1.1\r\nHost: x\r\n\r\n")
        await read_until(reader, b"event: sessions")
        session = ctx.sessions.start("g", ctx.tasks[9001])
        session.append(event_from_flow(make_flow(url=f"{SHOP}/global")))
        session.finish({"task_type": "navigate", "status": "SUCCESS"})
        seen = (await read_until(reader, b"event: finished")).decode()
        kinds = [line.split(": ", 1)[1] for line in seen.splitlines() if line.startswith("event: ")]
        # a new session starts (`session`); it replaces nothing, so there is no `reset`
        assert kinds[-3:] == ["session", "event", "finished"], seen
        assert seen.count('"session":"g"') == 3 and f"{SHOP}/global" in seen
        ctx.sessions.start("g", ctx.tasks[9001])  # started again: a restart, then the start
        again = (await read_until(reader, b"event: session")).decode()
        kinds = [line.split(": ", 1)[1] for line in again.splitlines() if line.startswith("event: ")]
        assert kinds == ["restarted", "session"], again
        writer.close()
        for _ in range(100):
            if not ctx.sessions.notices.count():
                break
            await asyncio.sleep(0.02)
        assert ctx.sessions.notices.count() == 0

    serve(tmp_path, scenario)


def test_stop_ends_open_streams(tmp_path):
    async def main() -> None:
        ctx = make_context(tmp_path)
        ctx.sessions.get_or_create("open")
        server = ControlServer(create_app(ctx), host="127.0.0.1", port=0)
        await server.start()
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"GET /sessions/open/events HTTP/1.1\r\nHost: x\r\n\r\n")
        await read_until(reader, b"event: session")
        await asyncio.wait_for(server.stop(), 5)
        # The stream is ended, not cut: its chunked body closes with the last chunk, then the connection.
        rest = await asyncio.wait_for(reader.read(), 5)
        assert rest.endswith(b"0\r\n\r\n") and reader.at_eof(), rest
        writer.close()

    asyncio.run(main())
