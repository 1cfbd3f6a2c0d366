#!/usr/bin/env python
"""Shared parts of the proxy benchmarks: a local upstream, a load generator, mitmdump runs.

Everything runs on 127.0.0.1 in separate processes, so the proxy under test
competes only with what the machine is already doing:

- `upstream`: a stdlib asyncio server (a raw `asyncio.Protocol`, no framework)
  answering every request with a small body at once; a request may ask for
  another status, content type, size or body with `X-Bench-*` headers, so a
  recorded HAR entry can be replayed faithfully. It never is the bottleneck:
  it does a fraction of the proxy's per-request work.
- `load`: a closed-loop HTTP/1.1 keep-alive client that sends absolute-form
  requests to the proxy from N connections for a fixed time and prints, as
  one JSON line, the number of answers and the latency percentiles.
- `Proxy`: a `mitmdump` process, with or without the webarena-live addon,
  started on free ports and pinned to a CPU; its RSS is read from /proc.

Run as a script, this file is the entry point of the two helper processes:

    python scripts/bench_common.py upstream --port P [--size N]
    python scripts/bench_common.py load --proxy-port P --url URL [--connections C] [--seconds S]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

REPO = Path(__file__).resolve().parent.parent
SCRIPT = Path(__file__).resolve()
MITMDUMP = Path(sys.executable).parent / "mitmdump"
ENTRY = REPO / "addon" / "entry.py"

CPUS = sorted(os.sched_getaffinity(0))
PROXY_CPU = CPUS[0]
"""The proxy runs alone on the first CPU; the upstream and the load generator share the other(s)."""
HELPER_CPUS = CPUS[1:] or CPUS


# --- small utilities -----------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_for_port(port: int, *, process: subprocess.Popen[Any] | None = None, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"process exited with {process.returncode} before listening on {port}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout} s")


def rss_bytes(pid: int) -> int:
    """Resident set size of a process, from /proc (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far, from /proc (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(values: Sequence[float], fraction: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def spread(values: Sequence[float]) -> str:
    """`min..max` of per-round figures: how noisy the machine was."""
    return f"{min(values):.2f}..{max(values):.2f}" if values else "-"


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """A Markdown table, so the output can be pasted into the README as is."""
    cells = [[str(h) for h in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    line = "| " + " | ".join(h.ljust(w) for h, w in zip(cells[0], widths, strict=True)) + " |"
    print(line)
    print("| " + " | ".join("-" * w for w in widths) + " |")
    for row in cells[1:]:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |")


def machine_line() -> str:
    load = os.getloadavg()
    return (
        f"machine: {os.cpu_count()} cores (this run may use {len(CPUS)}), "
        f"load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} at start"
    )


def pin(cpus: Sequence[int]) -> Any:
    """A `preexec_fn` that pins the child process to `cpus`."""

    def apply() -> None:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, set(cpus))

    return apply


def proxy_authorization(session: str) -> str:
    return "Basic " + base64.b64encode(f"{session}:x".encode()).decode("ascii")


# --- mitmdump, with or without the addon ---------------------------------------------------------


@dataclass
class Proxy:
    """One `mitmdump` process on free ports; `addon=False` is the baseline (plain mitmproxy)."""

    addon: bool
    options: Sequence[str] = ()
    """Extra `--set name=value` pairs (for both runs, e.g. `stream_large_bodies=64k`)."""
    addon_options: Sequence[str] = ()
    """Extra `--set` pairs for the addon run only (tasks, config, output dir)."""
    port: int = field(default_factory=free_port)
    control_port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    workdir: Path | None = None

    def command(self) -> list[str]:
        confdir = self.workdir / "mitmproxy" if self.workdir else Path(tempfile.mkdtemp())
        command = [str(MITMDUMP), "-q", "--listen-host", "127.0.0.1", "--mode", f"regular@{self.port}",
                   "--set", f"confdir={confdir}"]  # fmt: skip
        for option in self.options:
            command += ["--set", option]
        if self.addon:
            command += ["-s", str(ENTRY), "--set", f"webarena_control_port={self.control_port}",
                        "--set", "webarena_session_port=0"]  # fmt: skip
            for option in self.addon_options:
                command += ["--set", option]
        return command

    def start(self) -> Proxy:
        self.workdir = Path(tempfile.mkdtemp(prefix="bench-proxy-"))
        log = (self.workdir / "mitmdump.log").open("wb")
        self.process = subprocess.Popen(
            self.command(), stdout=log, stderr=subprocess.STDOUT, preexec_fn=pin([PROXY_CPU]),
            cwd=self.workdir,
        )  # fmt: skip
        wait_for_port(self.port, process=self.process)
        if self.addon:
            wait_for_port(self.control_port, process=self.process)
        return self

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def rss(self) -> int:
        return rss_bytes(self.pid)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def __enter__(self) -> Proxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def upstream(*, size: int = 256) -> Iterator[int]:
    """Run the upstream server in its own process; yields its port."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(SCRIPT), "upstream", "--port", str(port), "--size", str(size)],
        preexec_fn=pin(HELPER_CPUS),
    )  # fmt: skip
    try:
        wait_for_port(port, process=process)
        yield port
    finally:
        process.terminate()
        process.wait()


def run_load(
    proxy_port: int, url: str, *, connections: int, seconds: float, session: str | None = None
) -> dict[str, Any]:
    """Run the load generator in its own process for `seconds`; its JSON summary."""
    command = [sys.executable, str(SCRIPT), "load", "--proxy-port", str(proxy_port), "--url", url,
               "--connections", str(connections), "--seconds", str(seconds)]  # fmt: skip
    if session:
        command += ["--session", session]
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        check=True,
        preexec_fn=pin(HELPER_CPUS),
        timeout=seconds + 120,
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def control(port: int, method: str, path: str, body: Any = None, *, timeout: float = 120) -> Any:
    """One request to the addon's control port; the decoded JSON answer."""
    import http.client

    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        payload = json.dumps(body).encode() if body is not None else None
        connection.request(method, path, body=payload, headers={"Content-Type": "application/json"})
        answer = connection.getresponse()
        data = answer.read()
        if answer.status >= 400:
            raise RuntimeError(f"{method} {path}: {answer.status} {data[:500]!r}")
        return json.loads(data)
    finally:
        connection.close()


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

    def __init__(self, request: bytes, latencies: list[float], stop_at: float) -> None:
        self.request = request
        self.latencies = latencies
        self.stop_at = stop_at
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
        if now >= self.stop_at:
            assert self.transport is not None
            self.transport.close()
        else:
            self.send()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(None)


def build_request(url: str, session: str | None) -> bytes:
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
    if session:
        lines.append(f"Proxy-Authorization: {proxy_authorization(session)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def generate_load(
    proxy_port: int, url: str, connections: int, seconds: float, session: str | None
) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    request = build_request(url, session)
    latencies: list[float] = []
    started = time.perf_counter()
    stop_at = started + seconds
    clients = []
    for _ in range(connections):
        _, client = await loop.create_connection(
            lambda: LoadClient(request, latencies, stop_at), "127.0.0.1", proxy_port
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
    """Send `requests` through the proxy over `connections` keep-alive connections, in order per connection."""
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


def run_replay(
    proxy_port: int, phases: list[tuple[list[dict[str, Any]], int]], *, session: str | None
) -> None:
    """Replay HAR entries in a separate process, phase by phase: (entries, connections) each."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as file:
        spec = [[[base64.b64encode(replay_request(e, session)).decode() for e in entries], connections]
                for entries, connections in phases]  # fmt: skip
        json.dump(spec, file)
    try:
        subprocess.run(
            [sys.executable, str(SCRIPT), "replay", "--proxy-port", str(proxy_port), "--spec", file.name],
            check=True, preexec_fn=pin(HELPER_CPUS), timeout=1800,
        )  # fmt: skip
    finally:
        os.unlink(file.name)


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
    again = commands.add_parser("replay")
    again.add_argument("--proxy-port", type=int, required=True)
    again.add_argument("--spec", type=Path, required=True)
    args = parser.parse_args()
    if args.command == "replay":
        for requests, connections in json.loads(args.spec.read_text()):
            asyncio.run(replay(args.proxy_port, [base64.b64decode(r) for r in requests], connections))
        return 0
    if args.command == "upstream":
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(serve_upstream(args.port, args.size))
        return 0
    result = asyncio.run(
        generate_load(args.proxy_port, args.url, args.connections, args.seconds, args.session)
    )
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
