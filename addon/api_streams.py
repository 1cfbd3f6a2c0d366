"""The event streams (Server-Sent Events, via sse-starlette): one session's, and every session's.

A stream subscribes to the sessions in the same step (no await between) as it
takes the snapshot it opens with, so no event falls between the opening and
the live part. Through the proxy (the reserved host) mitmproxy buffers whole
responses, so a stream there is the snapshot only, and ends after it.

Notices are written in batches: a stream writes at most once every
`FLUSH_SECONDS`, all the notices that arrived since its last write at once
(after a quiet spell, the first goes out straight away). Each write costs the
proxy's loop far more than the messages in it (a trip through the middleware,
the response's send timeout and the socket), so a stream watched during a
busy run costs a few writes a second rather than one per event; every notice
is still its own message, in order.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from sse_starlette import EventSourceResponse, ServerSentEvent

from webarena_live.addon.sessions import Session, SessionStore

HEARTBEAT_SECONDS = 15
"""A comment this often keeps idle streams open through intermediaries and finds dead clients."""

STREAM_BACKLOG = 10_000
"""Notices held for one stream between two writes; past it the stream is cut off (a client reconnects
with `since` and loses nothing)."""

FLUSH_SECONDS = 0.25
"""The least time between two writes of one stream: the most a notice waits."""

RETRY_MS = 1000
"""How soon a browser's EventSource reconnects after a stream ends."""

Notice = tuple[str, dict[str, Any]]


class Subscription:
    """The notices waiting for one open stream, filled by the capture side, drained in batches."""

    def __init__(self) -> None:
        self.pending: list[Notice] = []
        self.overflowed = False
        self.closed = False
        self._ready = asyncio.Event()

    def put(self, kind: str, payload: dict[str, Any]) -> None:
        """Called once per notice, on the proxy's loop: keep it cheap."""
        if len(self.pending) >= STREAM_BACKLOG:
            self.overflowed = True
        else:
            self.pending.append((kind, payload))
        self._ready.set()

    def close(self) -> None:
        self.closed = True
        self._ready.set()

    async def batches(self) -> AsyncIterator[list[Notice]]:
        """Each batch of notices, oldest first, until the stream is closed or overflows."""
        loop = asyncio.get_running_loop()
        last_write = -FLUSH_SECONDS
        while True:
            await self._ready.wait()
            if not (self.closed or self.overflowed):
                # At once after a quiet spell (so a lone notice is not held back); in a busy one, the
                # notices of the next FLUSH_SECONDS join it.
                await asyncio.sleep(max(0.0, last_write + FLUSH_SECONDS - loop.time()))
            self._ready.clear()
            if self.overflowed:
                return
            batch, self.pending = self.pending, []
            if batch:
                last_write = loop.time()
                yield batch
            if self.closed and not self.pending:  # what came in during the last write goes out first
                return


class Streams:
    """The open streams of one app, so a shutdown can end them (a stream never ends on its own)."""

    def __init__(self) -> None:
        self._open: set[Subscription] = set()

    def open(self) -> Subscription:
        subscription = Subscription()
        self._open.add(subscription)
        return subscription

    def done(self, subscription: Subscription) -> None:
        self._open.discard(subscription)

    def close_all(self) -> None:
        for subscription in list(self._open):
            subscription.close()


_JSON = json.JSONEncoder(separators=(",", ":"))
"""One encoder for every message (`json.dumps` with options builds a new one per call)."""

_RETRY = ServerSentEvent(retry=RETRY_MS, sep="\n").encode()


def message(data: Any, *, event: str | None = None, event_id: int | None = None) -> bytes:
    """One message, its data one line of JSON.

    Written here rather than through sse-starlette's `ServerSentEvent`, which splits the data into
    lines and costs more than the rest of a notice: this data is one line of ASCII JSON (line breaks
    and every non-ASCII character escaped), so the format is just its fields."""
    head = "" if event is None else f"event: {event}\n"
    if event_id is not None:
        head += f"id: {event_id}\n"
    return f"{head}data: {_JSON.encode(data)}\n\n".encode()


def notice_message(kind: str, payload: dict[str, Any]) -> bytes:
    """A session's notice as a message: events carry their index as the message id (what `since`
    resumes from)."""
    if kind == "event":
        return message(payload, event_id=payload["index"])
    return message(payload, event=kind)


def _response(events: AsyncIterator[bytes]) -> EventSourceResponse:
    response = EventSourceResponse(
        events, ping=HEARTBEAT_SECONDS, sep="\n", headers={"Cache-Control": "no-cache"}
    )
    # A stream is the last answer on its connection: when it ends, so does the connection, which is
    # how a client reading to the end (curl, a plain socket) learns that the stream is over.
    response.headers["Connection"] = "close"
    response.headers["Content-Type"] = "text/event-stream"  # UTF-8 always (the standard's only encoding)
    return response


def session_stream(
    streams: Streams, session: Session, since: int, *, snapshot: bool, tail: int | None = None
) -> EventSourceResponse:
    """The session's state, its events from `since` (only the newest `tail` of them, with `tail`), then
    each new one, and the verdict at the end."""

    async def events() -> AsyncIterator[bytes]:
        finished = session.result is not None
        subscription = None
        try:
            if not snapshot and not finished:
                subscription = streams.open()
                session.listeners.append(subscription.put)
            start = since if tail is None else max(since, len(session.trace) - tail)
            opening = [_RETRY, message(session.describe(), event="session")]
            opening += [message(view, event_id=view["index"]) for view in session.events_view(start)]
            if session.result is not None:
                opening.append(message(session.result.to_dict(), event="finished"))
            yield b"".join(opening)
            if subscription is None:
                return
            async for batch in subscription.batches():
                ends = next((i for i, (kind, _) in enumerate(batch) if kind == "finished"), None)
                yield b"".join(
                    notice_message(*notice) for notice in batch[: None if ends is None else ends + 1]
                )
                if ends is not None:
                    return
        finally:
            if subscription is not None:
                streams.done(subscription)
                if subscription.put in session.listeners:
                    session.listeners.remove(subscription.put)

    return _response(events())


def global_stream(
    streams: Streams, store: SessionStore, *, snapshot: bool, each_event: bool = True
) -> EventSourceResponse:
    """Every session as it is now, then every session's notices: `session` (started), `event`,
    `reset`, `finished`; each names its session. Without `each_event`, a session's events are told
    as one `counts` notice per write instead (its event counts by type then), for watchers that
    only count them."""

    async def events() -> AsyncIterator[bytes]:
        subscription = None if snapshot else streams.open()
        counted: set[str] = set()  # sessions with a `counts` notice in the batch being gathered

        def listener(name: str, kind: str, payload: dict[str, Any]) -> None:
            assert subscription is not None
            if kind != "event":
                subscription.put(kind, payload if "session" in payload else {**payload, "session": name})
                counted.discard(name)  # events after this notice are told after it, by a counts of their own
            elif each_event:
                subscription.put(kind, payload)  # an event's view names its session already
            elif name not in counted:
                counted.add(name)
                subscription.put("counts", {"session": name})

        def counts_message(payload: dict[str, Any]) -> bytes:
            session = store.get(payload["session"])
            counts = session.trace.counts() if session is not None else {}
            return message({**payload, "counts": counts}, event="counts")

        try:
            if subscription is not None:
                store.listeners.append(listener)
            sessions = [session.describe() for session in store]
            yield _RETRY + message({"sessions": sessions}, event="sessions")
            if subscription is None:
                return
            async for batch in subscription.batches():
                counted.clear()
                yield b"".join(
                    counts_message(payload) if kind == "counts" else message(payload, event=kind)
                    for kind, payload in batch
                )
        finally:
            if subscription is not None:
                streams.done(subscription)
                if listener in store.listeners:
                    store.listeners.remove(listener)

    return _response(events())
