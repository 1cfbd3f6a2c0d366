"""The event streams (Server-Sent Events, via sse-starlette): one session's, and every session's.

A stream subscribes to the sessions in the same step (no await between) as it
takes the snapshot it opens with, so no event falls between the opening and
the live part. Through the proxy (the reserved host) mitmproxy buffers whole
responses, so a stream there is the snapshot only, and ends after it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from sse_starlette import EventSourceResponse, ServerSentEvent

from webarena_live.addon.sessions import Session, SessionStore

HEARTBEAT_SECONDS = 15
"""A comment this often keeps idle streams open through intermediaries and finds dead clients."""

STREAM_BACKLOG = 10_000
"""Notices queued for one slow stream client before it is cut off."""

RETRY_MS = 1000
"""How soon a browser's EventSource reconnects after a stream ends."""

_CLOSE: tuple[str, dict[str, Any]] = ("close", {})
"""Put on every open stream's queue by `close_all`."""


class Streams:
    """The open streams of one app, so a shutdown can end them (a stream never ends on its own)."""

    def __init__(self) -> None:
        self._queues: set[asyncio.Queue[tuple[str, dict[str, Any]]]] = set()

    def close_all(self) -> None:
        for queue in list(self._queues):
            with contextlib.suppress(asyncio.QueueFull):  # overflowed already: it ends anyway
                queue.put_nowait(_CLOSE)

    async def _notices(
        self, queue: asyncio.Queue[tuple[str, dict[str, Any]]], overflowed: Callable[[], bool]
    ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        while not overflowed():
            notice = await queue.get()
            if notice is _CLOSE:
                return
            yield notice


def message(data: Any, *, event: str | None = None, event_id: int | None = None) -> ServerSentEvent:
    """One message, its data one line of JSON."""
    text = json.dumps(data, separators=(",", ":"))
    return ServerSentEvent(text, event=event, id=None if event_id is None else str(event_id), sep="\n")


def _response(events: AsyncIterator[ServerSentEvent]) -> EventSourceResponse:
    response = EventSourceResponse(
        events, ping=HEARTBEAT_SECONDS, sep="\n", headers={"Cache-Control": "no-cache"}
    )
    # A stream is the last answer on its connection: when it ends, so does the connection, which is
    # how a client reading to the end (curl, a plain socket) learns that the stream is over.
    response.headers["Connection"] = "close"
    response.headers["Content-Type"] = "text/event-stream"  # UTF-8 always (the standard's only encoding)
    return response


def session_stream(streams: Streams, session: Session, since: int, *, snapshot: bool) -> EventSourceResponse:
    """The session's state, its events from `since`, then each new one, and the verdict at the end."""

    async def events() -> AsyncIterator[ServerSentEvent]:
        queue: asyncio.Queue[tuple[str, dict[str, Any]]] = asyncio.Queue(STREAM_BACKLOG)
        overflowed = False

        def listener(kind: str, payload: dict[str, Any]) -> None:
            nonlocal overflowed
            try:
                queue.put_nowait((kind, payload))
            except asyncio.QueueFull:
                overflowed = True

        finished = session.result is not None
        if not snapshot and not finished:
            session.listeners.append(listener)
            streams._queues.add(queue)
        opening = [ServerSentEvent(retry=RETRY_MS, sep="\n"), message(session.describe(), event="session")]
        opening += [message(view, event_id=view["index"]) for view in session.events_view(since)]
        if session.result is not None:
            opening.append(message(session.result.to_dict(), event="finished"))
        try:
            for item in opening:
                yield item
            if snapshot or finished:
                return
            async for kind, payload in streams._notices(queue, lambda: overflowed):
                if kind == "event":
                    yield message(payload, event_id=payload["index"])
                else:
                    yield message(payload, event=kind)
                if kind == "finished":
                    return
        finally:
            streams._queues.discard(queue)
            if listener in session.listeners:
                session.listeners.remove(listener)

    return _response(events())


def global_stream(streams: Streams, store: SessionStore, *, snapshot: bool) -> EventSourceResponse:
    """Every session as it is now, then every session's notices: `session` (started), `event`,
    `reset`, `finished`; each names its session."""

    async def events() -> AsyncIterator[ServerSentEvent]:
        queue: asyncio.Queue[tuple[str, dict[str, Any]]] = asyncio.Queue(STREAM_BACKLOG)
        overflowed = False

        def listener(name: str, kind: str, payload: dict[str, Any]) -> None:
            nonlocal overflowed
            try:
                queue.put_nowait((kind, {**payload, "session": name}))
            except asyncio.QueueFull:
                overflowed = True

        if not snapshot:
            store.listeners.append(listener)
            streams._queues.add(queue)
        sessions = [session.describe() for session in store]
        try:
            yield ServerSentEvent(retry=RETRY_MS, sep="\n")
            yield message({"sessions": sessions}, event="sessions")
            if snapshot:
                return
            async for kind, payload in streams._notices(queue, lambda: overflowed):
                yield message(payload, event=kind)
        finally:
            streams._queues.discard(queue)
            if listener in store.listeners:
                store.listeners.remove(listener)

    return _response(events())
