"""The event streams (Server-Sent Events, via sse-starlette): one session's, and every session's.

A stream subscribes to the sessions in the same step (no await between) as it
takes the snapshot it opens with, so no event falls between the opening and
the live part. Through the proxy (the reserved host) mitmproxy buffers whole
responses, so a stream there is the snapshot only, and ends after it.

Streams write in batches: at most once every `FLUSH_SECONDS`, all that
happened since the last write at once (after a quiet spell, at once). Capture
builds nothing for a watcher: it only wakes the stream, which reads the new
events from the session's trace when it writes (`EventFeed`), so a watched
run pays for each event's message in one tight loop a few times a second,
not on the proxy's per-flow path. Lifecycle notices (`reset`: a restart,
`session`: a start, `finished`, `pool`) are queued as they happen, with where they fell in the trace, so
every event still comes out in order around them, each its own message.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any

from sse_starlette import EventSourceResponse, ServerSentEvent

from webarena_live.evaluator import NetworkTrace
from webarena_live.runs.sessions import (
    EVENT,
    FINISHED,
    TRACE_REPLACED,
    NoticeBus,
    Session,
    SessionStore,
    Subscriber,
    event_view,
)

HEARTBEAT_SECONDS = 15
"""A comment this often keeps idle streams open through intermediaries and finds dead clients."""

STREAM_BACKLOG = 10_000
"""Lifecycle notices held for one stream between two writes; past it the stream is cut off (a client
reconnects with `since` and loses nothing)."""

EVENTS_PER_WRITE = 5_000
"""The most events one write of a stream carries; a stream further behind catches up over the next ones."""

FLUSH_SECONDS = 0.25
"""The least time between two writes of one stream: the most a notice waits."""

RETRY_MS = 1000
"""How soon a browser's EventSource reconnects after a stream ends."""


class Subscription:
    """One open stream's queue: the lifecycle notices waiting for it, and whether events came in."""

    def __init__(self) -> None:
        self.unsubscribe: Callable[[], None] = lambda: None
        self.pending: list[Any] = []
        self.overflowed = False
        self.closed = False
        self._ready = asyncio.Event()
        self.wake = self._ready.set
        """Called for every event captured (an `EVENT` notice): only marks the stream due to write."""

    def put(self, notice: Any) -> None:
        if len(self.pending) >= STREAM_BACKLOG:
            self.overflowed = True
        else:
            self.pending.append(notice)
        self._ready.set()

    def close(self) -> None:
        self.closed = True
        self._ready.set()

    async def batches(self) -> AsyncIterator[list[Any]]:
        """At each write, the notices queued since the last one (maybe none: then only events came in),
        until the stream is closed or overflows."""
        loop = asyncio.get_running_loop()
        last_write = -FLUSH_SECONDS
        while True:
            await self._ready.wait()
            if not (self.closed or self.overflowed):
                # At once after a quiet spell (so a lone event is not held back); in a busy one, what
                # comes in during the next FLUSH_SECONDS joins it.
                await asyncio.sleep(max(0.0, last_write + FLUSH_SECONDS - loop.time()))
            self._ready.clear()
            if self.overflowed:
                return
            batch, self.pending = self.pending, []
            last_write = loop.time()
            yield batch
            if self.closed and not self.pending:  # what came in during the last write goes out first
                return


class EventFeed:
    """The events of one session a stream has yet to write, read from the trace at write time.

    A session's trace is replaced when it starts again (or, idle, when it
    reaches its cap), and a replaced trace never grows: so at the notice of
    a replacement (`reset`: a restart, `TRACE_REPLACED`) the feed writes what is left
    of the trace it was reading, then follows the new one.
    """

    def __init__(self, session: Session, start: int, *, named: bool = False) -> None:
        self.session = session
        self.trace = session.trace
        self.next = start
        self.named = named
        """Messages named `event` (the global stream's) rather than numbered by index (a session's)."""

    def before(self, trace: NetworkTrace, upto: int) -> list[bytes]:
        """The messages of the events that came before a notice that fell at `upto` events of `trace`."""
        return self._follow(trace) + self._take(upto)

    def rest(self) -> list[bytes]:
        """The messages of the events captured since the last write (at most `EVENTS_PER_WRITE`)."""
        messages = self._follow(self.session.trace)
        return messages + self._take(min(len(self.trace), self.next + EVENTS_PER_WRITE))

    @property
    def behind(self) -> bool:
        return self.next < len(self.trace) or self.session.trace is not self.trace

    def _follow(self, trace: NetworkTrace) -> list[bytes]:
        """What is left of a replaced trace; from then on, `trace` from its start."""
        if trace is self.trace:
            return []
        messages = self._take(len(self.trace))
        self.trace, self.next = trace, 0
        return messages

    def _take(self, end: int) -> list[bytes]:
        name, trace = self.session.name, self.trace
        if self.named:
            messages = [message(event_view(name, trace, i), event="event") for i in range(self.next, end)]
        else:
            messages = [message(event_view(name, trace, i), event_id=i) for i in range(self.next, end)]
        self.next = max(self.next, end)
        return messages


class Streams:
    """The open streams of one app, so a shutdown can end them (a stream never ends on its own)."""

    def __init__(self) -> None:
        self._open: set[Subscription] = set()

    def open(self, notices: NoticeBus, listener: Subscriber, *, session: str | None = None) -> Subscription:
        """A stream's queue, with `listener` subscribed to `session`'s notices (every session's when
        None) until `done`."""
        subscription = Subscription()
        subscription.unsubscribe = notices.subscribe(listener, session=session)
        self._open.add(subscription)
        return subscription

    def done(self, subscription: Subscription | None) -> None:
        """The stream ended (None: it never subscribed)."""
        if subscription is not None:
            self._open.discard(subscription)
            subscription.unsubscribe()

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


def _caught_up(feeds: list[EventFeed], subscription: Subscription) -> list[bytes]:
    """The feeds' events captured since the last write; a feed still behind (it writes at most
    `EVENTS_PER_WRITE` at once) wakes the stream again for the next write."""
    written: list[bytes] = []
    for feed in feeds:
        written += feed.rest()
        if feed.behind:
            subscription.wake()
    return written


def _told(
    feed: EventFeed | None, kind: str, payload: dict[str, Any], trace: NetworkTrace, upto: int
) -> list[bytes]:
    """A notice's messages: the events captured before it (when the stream tells each event), then the
    notice, unless it only tells that the trace was replaced (the feed then follows the new one)."""
    written = feed.before(trace, upto) if feed is not None else []
    if kind != TRACE_REPLACED:
        written.append(message(payload, event=kind))
    return written


async def _written(events: AsyncGenerator[bytes, None]) -> AsyncIterator[bytes]:
    """The stream's writes, the empty ones left out (a batch of notices can tell nothing new); closing
    this closes `events` at once (its `finally` unsubscribes)."""
    async with contextlib.aclosing(events):
        async for chunk in events:
            if chunk:
                yield chunk


def _response(events: AsyncGenerator[bytes, None]) -> EventSourceResponse:
    response = EventSourceResponse(
        _written(events), ping=HEARTBEAT_SECONDS, sep="\n", headers={"Cache-Control": "no-cache"}
    )
    # A stream is the last answer on its connection: when it ends, so does the connection, which is
    # how a client reading to the end (curl, a plain socket) learns that the stream is over.
    response.headers["Connection"] = "close"
    response.headers["Content-Type"] = "text/event-stream"  # UTF-8 always (the standard's only encoding)
    return response


def session_stream(
    streams: Streams,
    store: SessionStore,
    session: Session,
    since: int,
    *,
    snapshot: bool,
    tail: int | None = None,
) -> EventSourceResponse:
    """The session's state, its events from `since` (only the newest `tail` of them, with `tail`), then
    each new one, and the verdict at the end. Events carry their index as the message id (what
    `since` resumes from)."""

    async def events() -> AsyncGenerator[bytes, None]:
        subscription = None

        def listener(session: Session, kind: str, payload: dict[str, Any] | None) -> None:
            assert subscription is not None
            if kind == EVENT:
                subscription.wake()
            else:  # a start after the opening tells the new state (`session`), as the opening did
                subscription.put((kind, payload, session.trace, len(session.trace)))

        try:
            if not snapshot and session.result is None:
                subscription = streams.open(store.notices, listener, session=session.name)
            start = since if tail is None else max(since, len(session.trace) - tail)
            opening = [_RETRY, message(session.describe(), event="session")]
            opening += [message(view, event_id=view["index"]) for view in session.events_view(start)]
            feed = EventFeed(session, len(session.trace))
            if session.result is not None:
                opening.append(message(session.result.to_dict(), event="finished"))
            yield b"".join(opening)
            if subscription is None:
                return
            async for notices in subscription.batches():
                written: list[bytes] = []
                for kind, payload, trace, upto in notices:
                    written += _told(feed, kind, payload, trace, upto)
                    if kind == FINISHED:
                        yield b"".join(written)
                        return
                written += _caught_up([feed], subscription)
                yield b"".join(written)
        finally:
            streams.done(subscription)

    return _response(events())


def global_stream(
    streams: Streams, store: SessionStore, *, snapshot: bool, each_event: bool = True
) -> EventSourceResponse:
    """Every session as it is now, then every session's notices: `reset` (restarted), `session`
    (started), `event`, `finished`, `pool`; each names its session, and each session's come in order. Without
    `each_event`, a write tells a session's new events as one `counts` notice (its event counts by
    type then), after the write's other notices, for watchers that only count them."""

    async def events() -> AsyncGenerator[bytes, None]:
        subscription: Subscription | None = None
        feeds: dict[str, EventFeed] = {}  # each_event: the sessions with events or notices since the opening
        # Counts only: the trace and length each session's last counts told (none are kept otherwise).
        told: dict[str, tuple[NetworkTrace, int]] = {}
        changed: dict[str, Session] = {}  # counts only: the sessions noticed since the last write
        if not each_event:
            told = {session.name: (session.trace, len(session.trace)) for session in store}

        def listener(session: Session, kind: str, payload: dict[str, Any] | None) -> None:
            assert subscription is not None
            name = session.name
            if not each_event:
                changed[name] = session
            if kind == EVENT:
                if each_event and name not in feeds:
                    # From the event just captured: its first since the stream opened.
                    feeds[name] = EventFeed(session, len(session.trace) - 1, named=True)
                subscription.wake()
                return
            if each_event and name not in feeds:
                feeds[name] = EventFeed(session, len(session.trace), named=True)
            payload = payload or {}
            payload = payload if "session" in payload else {**payload, "session": name}
            subscription.put((name, kind, payload, session.trace, len(session.trace)))

        def counts() -> list[bytes]:
            """The counts of the sessions noticed since the last write (never a walk of every session:
            a write follows each batch of events)."""
            written = []
            noticed = list(changed.values())
            changed.clear()
            for session in noticed:
                now = session.trace, len(session.trace)
                last = told.get(session.name)
                if last is None or last[0] is not now[0] or last[1] != now[1]:
                    told[session.name] = now
                    if now[1]:
                        data = {"session": session.name, "counts": session.trace.counts()}
                        written.append(message(data, event="counts"))
            return written

        try:
            if not snapshot:
                subscription = streams.open(store.notices, listener)
            sessions = [session.describe() for session in store]
            yield _RETRY + message({"sessions": sessions}, event="sessions")
            if subscription is None:
                return
            async for notices in subscription.batches():
                written: list[bytes] = []
                for name, kind, payload, trace, upto in notices:
                    written += _told(feeds[name] if each_event else None, kind, payload, trace, upto)
                written += _caught_up(list(feeds.values()), subscription) if each_event else counts()
                yield b"".join(written)
        finally:
            streams.done(subscription)

    return _response(events())
