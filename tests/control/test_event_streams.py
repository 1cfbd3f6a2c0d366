"""The event streams' batching: a watched run must cost the proxy a few writes a second, not
one per event per watcher, without holding back a lone notice or losing one. The control port runs in
the test's event loop (`test_control_server.serve`), read through real sockets on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import time

from tests.support.addon_helpers import SHOP, make_flow
from tests.support.control_server import context_of, read_response, read_until, serve
from webarena_live.control import streams as api_streams
from webarena_live.control.server import ControlServer
from webarena_live.control.streams import Subscription
from webarena_live.proxy.capture import event_from_flow
from webarena_live.runs import sessions as sessions_module


async def read_through(reader: asyncio.StreamReader, needle: bytes) -> bytes:
    """Read until `needle`, then to the end of the chunk that holds it (its message and the chunk's CRLF)."""
    seen = await read_until(reader, needle)
    while b"\n\n\r\n" not in seen[seen.index(needle) :]:
        chunk = await reader.read(4096)
        assert chunk, "stream ended inside a chunk"
        seen += chunk
    return seen


async def open_stream(
    server: ControlServer, target: str, opened: bytes = b"event: session"
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """`GET target` on the control port, read through the stream's opening (`opened`)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(f"GET {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    await read_through(reader, opened)
    return reader, writer


def event_ids(text: str) -> list[int]:
    """The `id:` of each message in `text`, in order."""
    return [int(line[4:]) for line in text.splitlines() if line.startswith("id: ")]


async def assert_refused(server: ControlServer, target: bytes) -> None:
    """`GET target` is answered with the JSON 400 of a bad parameter."""
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(b"GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % target)
    status, _, body = await read_response(reader)
    assert status == 400 and json.loads(body)["error"], body
    writer.close()


def chunks(raw: bytes) -> list[bytes]:
    """The chunks of a chunked HTTP body (what the server wrote, one `send` each); the head is skipped."""
    raw = raw.split(b"\r\n\r\n", 1)[1] if raw.startswith(b"HTTP/") else raw
    found = []
    while raw:
        size_line, _, rest = raw.partition(b"\r\n")
        size = int(size_line, 16)
        assert size and len(rest) >= size + 2, "an incomplete chunk"
        found.append(rest[:size])
        raw = rest[size + 2 :]
    return found


def messages(text: str) -> list[tuple[str, dict]]:
    """(event, data) of each whole message in `text`."""
    found = []
    for block in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "data" in fields:
            found.append((fields.get("event", "message"), json.loads(fields["data"])))
    return found


def test_a_burst_of_events_goes_out_in_one_write_each_its_own_message(tmp_path):
    async def scenario(server: ControlServer) -> None:
        session = context_of(server).sessions.get_or_create("busy")
        reader, writer = await open_stream(server, "/sessions/busy/events")
        for index in range(200):
            session.append(event_from_flow(make_flow(url=f"{SHOP}/burst/{index}")))
        body = await read_through(reader, f"{SHOP}/burst/199".encode())
        written = chunks(body)
        assert len(written) == 1, [len(chunk) for chunk in written]
        text = written[0].decode()
        assert event_ids(text) == list(range(200))
        assert text.count("\n\n") == 200  # one message per event
        writer.close()

    serve(tmp_path, scenario)


def test_a_lone_notice_goes_out_at_once_and_a_busy_stream_writes_at_most_once_per_flush(
    tmp_path, monkeypatch
):
    """With a long FLUSH_SECONDS, so the timings have room on a loaded machine."""
    monkeypatch.setattr(api_streams, "FLUSH_SECONDS", 3.0)

    async def scenario(server: ControlServer) -> None:
        session = context_of(server).sessions.get_or_create("paced")
        reader, writer = await open_stream(server, "/sessions/paced/events")
        started = time.monotonic()
        session.append(event_from_flow(make_flow(url=f"{SHOP}/first")))
        await read_through(reader, f"{SHOP}/first".encode())
        assert time.monotonic() - started < 1.5  # after a quiet spell: not held back for the flush
        session.append(event_from_flow(make_flow(url=f"{SHOP}/second")))
        session.append(event_from_flow(make_flow(url=f"{SHOP}/third")))
        too_soon = asyncio.ensure_future(read_through(reader, f"{SHOP}/third".encode()))
        done, _ = await asyncio.wait({too_soon}, timeout=1.0)
        assert not done  # the next write waits for the flush interval
        body = await asyncio.wait_for(too_soon, timeout=10)
        assert time.monotonic() - started >= 2.5
        (written,) = chunks(body)  # both in one write
        assert f"{SHOP}/second".encode() in written and f"{SHOP}/third".encode() in written
        writer.close()

    serve(tmp_path, scenario)


def test_tail_opens_with_the_newest_events_only(tmp_path):
    async def scenario(server: ControlServer) -> None:
        session = context_of(server).sessions.get_or_create("long")
        for index in range(50):
            session.append(event_from_flow(make_flow(url=f"{SHOP}/long/{index}")))
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"GET /sessions/long/events?tail=10 HTTP/1.1\r\nHost: x\r\n\r\n")
        seen = (await read_through(reader, f"{SHOP}/long/49".encode())).decode()
        assert [data["index"] for kind, data in messages(seen) if kind == "message"] == list(range(40, 50))
        session.append(event_from_flow(make_flow(url=f"{SHOP}/long/50")))
        await read_through(reader, f"{SHOP}/long/50".encode())  # the live part is not limited
        writer.close()
        await assert_refused(server, b"/sessions/long/events?tail=-1")

    serve(tmp_path, scenario)


def test_the_global_stream_can_tell_counts_instead_of_every_event(tmp_path):
    """`/events?events=counts`: what a list of sessions needs, at a few notices a second however busy;
    after a restart, the counts that follow are the new run's, told after its `reset`."""

    async def scenario(server: ControlServer) -> None:
        ctx = context_of(server)
        reader, writer = await open_stream(server, "/events?events=counts", b"event: sessions")
        session = ctx.sessions.start("c", ctx.tasks[9001])
        for index in range(30):
            session.append(event_from_flow(make_flow(url=f"{SHOP}/counted/{index}")))
        seen = (await read_through(reader, b'"total":30')).decode()
        assert "/counted/" not in seen and "event: event" not in seen
        counts = [data for kind, data in messages(seen) if kind == "counts"]
        assert counts == [
            {"session": "c", "counts": {"navigation": 0, "mutation": 0, "other": 30, "total": 30}}
        ]
        session.append(event_from_flow(make_flow(url=f"{SHOP}/counted/30")))  # a later batch counts again
        await read_through(reader, b'"total":31')

        for index in range(3):
            session.append(event_from_flow(make_flow(url=f"{SHOP}/before/{index}")))
        session = ctx.sessions.start("c", ctx.tasks[9001])  # restarted before the next write
        for index in range(5):
            session.append(event_from_flow(make_flow(url=f"{SHOP}/after/{index}")))
        told = messages((await read_through(reader, b"event: restarted")).decode())  # one write: all of them
        kinds = [kind for kind, _ in told]
        assert kinds.index("restarted") < len(kinds) - 1 - kinds[::-1].index("counts"), kinds
        assert told[-1] == (
            "counts",
            {"session": "c", "counts": {**counts[0]["counts"], "other": 5, "total": 5}},
        )
        session.finish({"task_type": "navigate", "status": "SUCCESS"})
        await read_until(reader, b"event: finished")
        writer.close()
        await assert_refused(server, b"/events?events=every")

    serve(tmp_path, scenario)


def test_a_closed_subscription_still_delivers_what_it_holds():
    """A shutdown ends every stream, after the notices already taken in (even during a write)."""

    async def main() -> None:
        subscription = Subscription()
        subscription.put(("restarted", 0))
        batches = subscription.batches()
        assert await anext(batches) == [("restarted", 0)]
        subscription.put(("finished", 1))  # arrives while the first batch is being written
        subscription.close()
        assert [batch async for batch in batches] == [[("finished", 1)]]

        overflowing = Subscription()
        for index in range(api_streams.STREAM_BACKLOG + 1):
            overflowing.put(("restarted", index))
        assert overflowing.overflowed
        assert [batch async for batch in overflowing.batches()] == []  # cut off: the client reconnects

    asyncio.run(main())


def test_events_around_a_restart_come_out_in_order_in_one_write(tmp_path):
    """The stream reads events from the trace when it writes; a restart in between replaces the trace,
    and the old run's last events still come before the `reset` (and the new run's `session`), the new
    run's after them."""

    async def scenario(server: ControlServer) -> None:
        ctx = context_of(server)
        session = ctx.sessions.start("r", ctx.tasks[9001])
        reader, writer = await open_stream(server, "/sessions/r/events")
        for index in range(3):
            session.append(event_from_flow(make_flow(url=f"{SHOP}/old/{index}")))
        session = ctx.sessions.start("r", ctx.tasks[9001])
        for index in range(4):
            session.append(event_from_flow(make_flow(url=f"{SHOP}/new/{index}")))
        body = await read_through(reader, f"{SHOP}/new/3".encode())
        (written,) = chunks(body)
        told = [
            (kind, data.get("url", "").removeprefix(SHOP), data.get("index"))
            for kind, data in messages(written.decode())
        ]
        assert told == [
            *[("message", f"/old/{i}", i) for i in range(3)],
            ("restarted", "", None),
            ("session", "", None),  # the new run's state, as the stream opened with the first's
            *[("message", f"/new/{i}", i) for i in range(4)],
        ]
        writer.close()

    serve(tmp_path, scenario)


def test_a_stream_far_behind_catches_up_over_several_writes(tmp_path, monkeypatch):
    monkeypatch.setattr(api_streams, "EVENTS_PER_WRITE", 10)
    monkeypatch.setattr(api_streams, "FLUSH_SECONDS", 0.05)

    async def scenario(server: ControlServer) -> None:
        session = context_of(server).sessions.get_or_create("behind")
        reader, writer = await open_stream(server, "/sessions/behind/events")
        for index in range(35):
            session.append(event_from_flow(make_flow(url=f"{SHOP}/many/{index}")))
        body = await read_through(reader, f"{SHOP}/many/34".encode())
        written = chunks(body)
        assert [text.count(b"\n\n") for text in written] == [10, 10, 10, 5]
        ids = event_ids(b"".join(written).decode())
        assert ids == list(range(35))
        writer.close()

    serve(tmp_path, scenario)


def test_the_global_stream_tells_each_sessions_events_in_order(tmp_path):
    async def scenario(server: ControlServer) -> None:
        ctx = context_of(server)
        early = ctx.sessions.get_or_create("early")
        early.append(event_from_flow(make_flow(url=f"{SHOP}/before-open")))
        reader, writer = await open_stream(server, "/events", b"event: sessions")
        late = ctx.sessions.get_or_create("late")
        for index in range(5):
            early.append(event_from_flow(make_flow(url=f"{SHOP}/e/{index}")))
            late.append(event_from_flow(make_flow(url=f"{SHOP}/l/{index}")))
        seen = messages((await read_through(reader, f"{SHOP}/l/4".encode())).decode())
        events = [(data["session"], data["index"], data["url"]) for kind, data in seen if kind == "event"]
        assert [e for e in events if e[0] == "early"] == [("early", i + 1, f"{SHOP}/e/{i}") for i in range(5)]
        assert [e for e in events if e[0] == "late"] == [("late", i, f"{SHOP}/l/{i}") for i in range(5)]
        writer.close()

    serve(tmp_path, scenario)


def test_an_idle_traces_replacement_loses_no_event_even_with_a_restart_in_the_same_write(
    tmp_path, monkeypatch
):
    """An idle session's trace is replaced at its cap; that replacement is queued like a restart's, so
    the stream writes the old trace's last events, then the new one's, and the restart after them."""
    monkeypatch.setattr(sessions_module, "IDLE_TRACE_LIMIT", 3)
    monkeypatch.setattr(api_streams, "FLUSH_SECONDS", 1.0)

    async def scenario(server: ControlServer) -> None:
        ctx = context_of(server)
        session = ctx.sessions.get_or_create("idle")
        reader, writer = await open_stream(server, "/sessions/idle/events")
        for index in range(3):
            session.append(event_from_flow(make_flow(url=f"{SHOP}/full/{index}")))
        await read_through(reader, f"{SHOP}/full/2".encode())
        # Within one flush interval: the cap replaces the trace twice, then a restart replaces it again.
        for index in range(4):
            session.append(event_from_flow(make_flow(url=f"{SHOP}/over/{index}")))
        session = ctx.sessions.start("idle", ctx.tasks[9001])
        session.append(event_from_flow(make_flow(url=f"{SHOP}/run/0")))
        seen = messages((await read_through(reader, f"{SHOP}/run/0".encode())).decode())
        told = [(kind, data.get("url", "").removeprefix(SHOP), data.get("index")) for kind, data in seen]
        assert told == [
            ("message", "/over/0", 0),
            ("message", "/over/1", 1),
            ("message", "/over/2", 2),
            ("message", "/over/3", 0),
            ("restarted", "", None),
            ("session", "", None),
            ("message", "/run/0", 0),
        ]
        writer.close()

    serve(tmp_path, scenario)
