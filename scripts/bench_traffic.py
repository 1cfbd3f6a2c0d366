#!/usr/bin/env python
"""The traffic side of the proxy benchmarks: a local upstream server, a load generator, a replayer.

Each runs as its own process, started by `bench_common` (pinned to the CPUs
the proxy under test does not use), so they never compete with the proxy's
event loop:

- `upstream`: a stdlib asyncio server (a raw `asyncio.Protocol`, no framework)
  answering every request with a small body at once; a request may ask for
  another status, content type, size or body with `X-Bench-*` headers, so a
  recorded HAR entry can be replayed faithfully. It never is the bottleneck:
  it does a fraction of the proxy's per-request work.
- `load`: a closed-loop HTTP/1.1 keep-alive client that sends absolute-form
  requests to the proxy from N connections for a fixed time (or number of
  answers) and prints, as one JSON line, the count and latency percentiles.
- `latency`: one request at a time, taking turns between several proxies,
  and the latency percentiles of each.
- `replay`: sends recorded HAR entries through the proxy, in order per connection.

    python scripts/bench_traffic.py upstream --port P [--size N]
    python scripts/bench_traffic.py load --proxy-port P --url URL [--connections C] [--seconds S]
    python scripts/bench_traffic.py latency --proxy-ports P1,P2 --url URL [--seconds S]
    python scripts/bench_traffic.py replay --proxy-port P --spec FILE
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit


def proxy_authorization(session: str) -> str:
    return "Basic " + base64.b64encode(f"{session}:x".encode()).decode("ascii")


def percentile(values: Sequence[float], fraction: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]


# --- the upstream server -------------------------------------------------------------------------


class UpstreamProtocol(asyncio.Protocol):
    """Answers each request on a keep-alive connection as soon as its head (and body) arrived."""

    def __init__(self, default_body: bytes) -> None:
        self.default_body = default_body
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(self.buffer[:end]).decode("latin-1")
            lines = head.split("\r\n")
            headers = {}
            for line in lines[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            length = int(headers.get("content-length", "0") or 0)
            if len(self.buffer) < end + 4 + length:
                return
            del self.buffer[: end + 4 + length]
            self.respond(lines[0], headers)

    def respond(self, request_line: str, headers: dict[str, str]) -> None:
        assert self.transport is not None
        path = request_line.split(" ")[1] if " " in request_line else "/"
        status = int(headers.get("x-bench-status", "200"))
        body = self.default_body
        if "x-bench-size" in headers:
            body = b"x" * int(headers["x-bench-size"])
        if "x-bench-body" in headers:
            body = base64.b64decode(headers["x-bench-body"])
        content_type = headers.get("x-bench-type") or guess_type(path)
        extra = ""
        if 300 <= status < 400:
            extra = f"Location: {headers.get('x-bench-location', '/')}\r\n"
        head = (
            f"HTTP/1.1 {status} OK\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
            f"Cache-Control: no-store\r\n{extra}\r\n"
        )
        self.transport.write(head.encode("latin-1") + body)


def guess_type(path: str) -> str:
    path = path.split("?", 1)[0]
    if path.endswith(".js"):
        return "application/javascript"
    if path.endswith(".css"):
        return "text/css"
    if path.endswith((".png", ".jpg", ".woff2")):
        return "application/octet-stream"
    if "/api/" in path or path.endswith(".json"):
        return "application/json"
    return "text/html; charset=utf-8"


async def serve_upstream(port: int, size: int) -> None:
    body = (b"<!doctype html><p>" + b"x" * max(0, size - 32) + b"</p>\n")[: max(size, 1)]
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: UpstreamProtocol(body), "127.0.0.1", port, backlog=1024)
    async with server:
        await server.serve_forever()


# --- the load generator --------------------------------------------------------------------------


class LoadClient(asyncio.Protocol):
    """One keep-alive connection sending the same request again as soon as the answer is complete."""

    def __init__(self, request: bytes, latencies: list[float], stop_at: float, limit: int = 0) -> None:
        self.request = request
        self.latencies = latencies
        self.stop_at = stop_at
        self.limit = limit
        self.buffer = bytearray()
        self.expected: int | None = None
        self.sent_at = 0.0
        self.transport: asyncio.Transport | None = None
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.send()

    def send(self) -> None:
        assert self.transport is not None
        self.sent_at = time.perf_counter()
        self.transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if self.expected is None:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            length = 0
            for line in bytes(self.buffer[:end]).split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            self.expected = end + 4 + length
        if len(self.buffer) < self.expected:
            return
        now = time.perf_counter()
        self.latencies.append(now - self.sent_at)
        del self.buffer[: self.expected]
        self.expected = None
        if now >= self.stop_at or (self.limit and len(self.latencies) >= self.limit):
            assert self.transport is not None
            self.transport.close()
        else:
            self.send()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(None)


def build_request(url: str, session: str | None, headers: Sequence[str] = ()) -> bytes:
    host = urlsplit(url).netloc
    lines = [
        f"GET {url} HTTP/1.1",
        f"Host: {host}",
        "User-Agent: webarena-live-bench",
        "Accept: application/json, text/plain, */*",
        "Sec-Fetch-Dest: empty",
        "Sec-Fetch-Mode: cors",
        "Sec-Fetch-Site: same-origin",
    ]
    lines.extend(headers)
    if session:
        lines.append(f"Proxy-Authorization: {proxy_authorization(session)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def generate_load(
    proxy_port: int,
    url: str,
    connections: int,
    seconds: float,
    session: str | None,
    limit: int = 0,
    headers: Sequence[str] = (),
) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    request = build_request(url, session, headers)
    latencies: list[float] = []
    started = time.perf_counter()
    stop_at = started + seconds
    clients = []
    for _ in range(connections):
        _, client = await loop.create_connection(
            lambda: LoadClient(request, latencies, stop_at, limit), "127.0.0.1", proxy_port
        )
        clients.append(client)
    await asyncio.wait_for(asyncio.gather(*(c.done for c in clients)), timeout=seconds + 60)
    elapsed = time.perf_counter() - started
    return {
        "requests": len(latencies),
        "seconds": elapsed,
        "rps": len(latencies) / elapsed,
        "p50_ms": percentile(latencies, 0.50) * 1000,
        "p99_ms": percentile(latencies, 0.99) * 1000,
    }


async def alternate_latency(
    proxy_ports: Sequence[int], url: str, seconds: float, session: str | None
) -> dict[str, Any]:
    """One request at a time, taking turns between the proxies: latency percentiles per proxy.

    Only one proxy works at any moment (none waits for another's CPU time), and
    every proxy is measured in the same seconds as the others (the machine's
    drift hits them alike).
    """
    request = build_request(url, session)
    connections = [await asyncio.open_connection("127.0.0.1", port) for port in proxy_ports]
    latencies: list[list[float]] = [[] for _ in proxy_ports]
    stop_at = time.perf_counter() + seconds
    try:
        while time.perf_counter() < stop_at:
            for (reader, writer), samples in zip(connections, latencies, strict=True):
                started = time.perf_counter()
                writer.write(request)
                await _read_response(reader)
                samples.append(time.perf_counter() - started)
    finally:
        for _, writer in connections:
            writer.close()
    return {
        "requests": [len(samples) for samples in latencies],
        "p50_ms": [percentile(samples, 0.50) * 1000 for samples in latencies],
        "p99_ms": [percentile(samples, 0.99) * 1000 for samples in latencies],
    }


# --- replaying HAR entries through the proxy ------------------------------------------------------

_HOP_HEADERS = frozenset({"host", "content-length", "connection", "transfer-encoding", "proxy-authorization"})


def replay_request(entry: dict[str, Any], session: str | None) -> bytes:
    """The HTTP/1.1 request (absolute form, for a proxy) that makes the upstream answer as `entry` says.

    The recorded answer travels in `X-Bench-*` request headers: status, content type, body, redirect.
    """
    request, response = entry["request"], entry["response"]
    url = request["url"]
    body = ((request.get("postData") or {}).get("text") or "").encode()
    lines = [f"{request['method']} {url} HTTP/1.1", f"Host: {urlsplit(url).netloc}"]
    lines += [
        f"{h['name']}: {h['value']}" for h in request["headers"] if h["name"].lower() not in _HOP_HEADERS
    ]
    content = response.get("content") or {}
    lines.append(f"X-Bench-Status: {response['status']}")
    if content.get("mimeType"):
        lines.append(f"X-Bench-Type: {content['mimeType']}")
    if isinstance(content.get("text"), str):
        lines.append("X-Bench-Body: " + base64.b64encode(content["text"].encode()).decode("ascii"))
    if response.get("redirectURL"):
        lines.append(f"X-Bench-Location: {response['redirectURL']}")
    if session:
        lines.append(f"Proxy-Authorization: {proxy_authorization(session)}")
    lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8") + body


async def _read_response(reader: asyncio.StreamReader) -> None:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    await reader.readexactly(length)


async def replay(proxy_port: int, requests: list[bytes], connections: int) -> None:
    """Send `requests` through the proxy over keep-alive connections, in order per connection."""
    queue: asyncio.Queue[bytes] = asyncio.Queue()
    for item in requests:
        queue.put_nowait(item)

    async def worker() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy_port)
        try:
            while not queue.empty():
                writer.write(queue.get_nowait())
                await _read_response(reader)
        finally:
            writer.close()

    await asyncio.gather(*(worker() for _ in range(max(1, min(connections, len(requests))))))


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    up = commands.add_parser("upstream")
    up.add_argument("--port", type=int, required=True)
    up.add_argument("--size", type=int, default=256)
    load = commands.add_parser("load")
    load.add_argument("--proxy-port", type=int, required=True)
    load.add_argument("--url", required=True)
    load.add_argument("--connections", type=int, default=32)
    load.add_argument("--seconds", type=float, default=5.0)
    load.add_argument("--session")
    load.add_argument("--limit", type=int, default=0, help="stop after this many answers (0: no limit)")
    load.add_argument("--header", action="append", default=[], help="extra request header line")
    turns = commands.add_parser("latency")
    turns.add_argument("--proxy-ports", required=True, help="comma-separated proxy ports, served in turn")
    turns.add_argument("--url", required=True)
    turns.add_argument("--seconds", type=float, default=5.0)
    turns.add_argument("--session")
    again = commands.add_parser("replay")
    again.add_argument("--proxy-port", type=int, required=True)
    again.add_argument("--spec", type=Path, required=True)
    args = parser.parse_args()
    if args.command == "replay":
        for requests, connections in json.loads(args.spec.read_text()):
            asyncio.run(replay(args.proxy_port, [base64.b64decode(r) for r in requests], connections))
        return 0
    if args.command == "latency":
        ports = [int(port) for port in args.proxy_ports.split(",")]
        print(json.dumps(asyncio.run(alternate_latency(ports, args.url, args.seconds, args.session))))
        return 0
    if args.command == "upstream":
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(serve_upstream(args.port, args.size))
        return 0
    result = asyncio.run(
        generate_load(
            args.proxy_port, args.url, args.connections, args.seconds, args.session, args.limit, args.header
        )
    )
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
