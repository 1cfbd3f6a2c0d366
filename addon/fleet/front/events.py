"""`GET /events` of `serve --workers N`: every worker's notices as one stream, with the front's own
(`SessionRegistry.announce`: `lost`, the pool's) beside them (docs/architecture.md, Workers).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
from httpx_sse import EventSource
from sse_starlette import EventSourceResponse
from starlette.requests import Request
from starlette.responses import Response

from webarena_live.control.errors import WorkerRefusal
from webarena_live.control.streams import HEARTBEAT_SECONDS, RETRY_MS
from webarena_live.fleet.front.front import Front
from webarena_live.fleet.front.link import ASK_DEADLINE, relayed
from webarena_live.fleet.workers.local import Worker


async def merged_events(front: Front, request: Request) -> Response:
    """`GET /events` of every worker as one stream: one `sessions` opening with every worker's
    sessions, then each worker's notices as they come."""
    workers = front.up_workers()
    upstreams: list[tuple[Worker, httpx.Response]] = []
    for worker in workers:
        try:
            upstream = await front.link.send(worker, request, b"")
        except WorkerRefusal:
            continue  # a worker that does not answer: the stream goes on without it
        if upstream.status_code != 200:
            content = await upstream.aread()
            for _, opened in upstreams:
                await opened.aclose()
            await upstream.aclose()
            raise relayed(upstream, content)
        upstreams.append((worker, upstream))

    async def events() -> AsyncIterator[bytes]:
        queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        front.registry.event_streams.add(queue)
        sessions: list[dict[str, Any]] = list(front.registry.lost.values())
        readers = []
        try:
            for worker, upstream in upstreams:
                source = EventSource(upstream).aiter_sse()
                with contextlib.suppress(TimeoutError, httpx.HTTPError):
                    async with asyncio.timeout(ASK_DEADLINE):  # a worker that stalls now: left out
                        async for sse in source:
                            if sse.event == "sessions":
                                views = json.loads(sse.data)["sessions"]
                                where = {"worker": worker.index, "node": worker.node}
                                sessions += [{**view, **where} for view in views]
                                break
                readers.append(asyncio.create_task(_pump(source, queue)))
            opening = {"sessions": sessions}
            yield f"retry: {RETRY_MS}\n\nevent: sessions\ndata: {json.dumps(opening)}\n\n".encode()
            open_readers = len(readers)
            while open_readers:
                item = await queue.get()
                if item is None:
                    open_readers -= 1
                    continue
                yield item
        finally:
            front.registry.event_streams.discard(queue)
            for reader in readers:
                reader.cancel()
            for _, upstream in upstreams:
                await upstream.aclose()

    response = EventSourceResponse(
        events(), ping=HEARTBEAT_SECONDS, sep="\n", headers={"Cache-Control": "no-cache"}
    )
    response.headers["Connection"] = "close"
    response.headers["Content-Type"] = "text/event-stream"
    return response


async def _pump(source: AsyncIterator[Any], queue: asyncio.Queue[bytes | None]) -> None:
    """One worker's notices into the merged stream, each as it was written; None when it ends."""
    try:
        async for sse in source:
            head = f"event: {sse.event}\n" if sse.event and sse.event != "message" else ""
            if sse.id:
                head += f"id: {sse.id}\n"
            await queue.put(f"{head}data: {sse.data}\n\n".encode())
    except httpx.HTTPError:
        pass  # the worker went away: its part of the stream ends
    finally:
        await queue.put(None)
