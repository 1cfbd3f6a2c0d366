"""Shared parts of the proxy benchmarks: proxy runs, the traffic processes, small statistics.

Everything runs on 127.0.0.1 in separate processes, so the proxy under test
competes only with what the machine is already doing:

- `Proxy`: `webarena-live serve` (what users run), or plain `mitmdump -q`
  as the baseline, started on free ports and pinned to the first CPU; its
  RSS and CPU time are read from /proc;
- `upstream`, `run_load`, `run_replay`: the local upstream server, the load
  generator and the HAR replayer of `bench_traffic`, each in its own
  process on the other CPU(s).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
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

from bench_traffic import percentile, proxy_authorization, replay_request

from webarena_live.launch import Ports, ServeProcess, free_ports

__all__ = ["percentile", "proxy_authorization"]

REPO = Path(__file__).resolve().parent.parent
TRAFFIC = Path(__file__).resolve().with_name("bench_traffic.py")
"""The helper processes' entry point."""
MITMDUMP = Path(sys.executable).parent / "mitmdump"
WEBARENA_LIVE = Path(sys.executable).parent / "webarena-live"

CPUS = sorted(os.sched_getaffinity(0))
PROXY_CPU = CPUS[0]
"""The proxy runs alone on the first CPU; the upstream and the load generator share the other(s)."""
HELPER_CPUS = CPUS[1:] or CPUS


# --- small utilities -----------------------------------------------------------------------------


def free_port() -> int:
    return free_ports(1)[0]


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


def other_tree(spec: str, work: Path) -> tuple[dict[str, str], str]:
    """The environment that runs another tree's package first on `PYTHONPATH`, and what it is (`spec` and
    the package a process started with it imports, checked).

    `spec` is a directory that holds the package as `webarena_live/`, or a commit of this repository,
    which is exported under `work` the way the package is installed: `addon/` as `webarena_live/`, with
    `evaluator/` in it (its `tasks` link finds the exported `tasks/` beside it).
    """
    directory = Path(spec)
    if not directory.is_dir():
        root = Path(__file__).resolve().parent.parent

        def git(*args: str) -> subprocess.CompletedProcess[bytes]:
            return subprocess.run(["git", "-C", str(root), *args], capture_output=True, check=False)

        commit = git("rev-parse", "--verify", "--quiet", "--end-of-options", f"{spec}^{{commit}}")
        if commit.returncode:
            raise SystemExit(f"{spec} is no directory and no commit of {root}")
        archive = git("archive", commit.stdout.decode().strip(), "addon", "evaluator", "tasks")
        if archive.returncode:
            raise SystemExit(f"commit {spec} lacks the package's folders: {archive.stderr.decode().strip()}")
        directory = Path(tempfile.mkdtemp(prefix="other-tree-", dir=work))
        subprocess.run(["tar", "-x", "-C", str(directory)], input=archive.stdout, check=True)
        (directory / "addon").rename(directory / "webarena_live")
        (directory / "evaluator").rename(directory / "webarena_live" / "evaluator")
    if not (directory / "webarena_live" / "__init__.py").exists():
        raise SystemExit(f"{spec} holds no webarena_live/ package")
    paths = [str(directory.resolve()), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {"PYTHONPATH": os.pathsep.join(paths)}
    where = "import webarena_live; print(webarena_live.__file__)"
    found = subprocess.run([sys.executable, "-c", where], env={**os.environ, **env}, capture_output=True,
                           text=True, check=False)  # fmt: skip
    package = Path(found.stdout.strip() or ".").parent.resolve()
    if package != (directory / "webarena_live").resolve():  # what a process with `env` imports, checked
        raise SystemExit(f"{spec}: Python imports webarena_live from {package}: {found.stderr.strip()}")
    return env, f"{spec}, from {package}"


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def spread(values: Sequence[float]) -> str:
    """`min..max` of per-round figures: how noisy the machine was."""
    return f"{min(values):.2f}..{max(values):.2f}" if values else "-"


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """A Markdown table, so the output can be pasted into the docs as is."""
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


# --- webarena-live serve, or plain mitmdump -----------------------------------------------------


def _bench_ports() -> Ports:
    """A proxy port and a control port; no session port (`--session-port off`: no proxy credentials)."""
    proxy, control = free_ports(2)
    return Ports(proxy=proxy, session=0, control=control)


@dataclass
class Proxy:
    """One proxy process on free ports: `webarena-live serve --quiet` with `serve=True`, else the
    baseline, plain `mitmdump -q` (mitmproxy's DumpMaster, like `serve`; both log warnings or errors
    only and print nothing per flow). Both run alone on `PROXY_CPU`, through `ServeProcess`."""

    serve: bool
    options: Sequence[str] = ()
    """Extra `--set name=value` pairs (for both runs, e.g. `stream_large_bodies=64k`)."""
    serve_options: Sequence[str] = ()
    """Extra `--set` pairs for `serve` only (tasks, config, output dir)."""
    serve_args: Sequence[str] = ()
    """More `serve` arguments (`--no-gc-tuning`)."""
    cpus: Sequence[int] = (PROXY_CPU,)
    """The CPUs the proxy (and any worker process it starts) may run on."""
    ports: Ports = field(default_factory=lambda: _bench_ports())
    env: dict[str, str] = field(default_factory=dict)
    """More environment for the process (another tree's package first on `PYTHONPATH`: `other_tree`)."""
    process: ServeProcess | None = None
    workdir: Path | None = None

    @property
    def port(self) -> int:
        return self.ports.proxy

    @property
    def control_port(self) -> int:
        return self.ports.control

    def start(self) -> Proxy:
        self.workdir = Path(tempfile.mkdtemp(prefix="bench-proxy-"))
        options = [f"confdir={self.workdir / 'mitmproxy'}", *self.options]
        if self.serve:
            options += [f"webarena_journal_dir={self.workdir / 'journal'}", *self.serve_options]
            args, command = ["--quiet", "--listen-host", "127.0.0.1", *self.serve_args], None
        else:
            args = ["-q", "--listen-host", "127.0.0.1", "--mode", f"regular@{self.port}"]
            command = [str(MITMDUMP)]
        args += [arg for option in options for arg in ("--set", option)]
        self.process = ServeProcess(
            *args, ports=self.ports, command=command, control=self.serve, cwd=self.workdir,
            log=self.workdir / "proxy.log", preexec_fn=pin(self.cpus), env=self.env,
        )  # fmt: skip
        self.process.start()
        return self

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def rss(self) -> int:
        return rss_bytes(self.pid)

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()
        self.process = None
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)  # journals, CA files, the log
            self.workdir = None

    def __enter__(self) -> Proxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def upstream(*, size: int = 256) -> Iterator[int]:
    """Run the upstream server in its own process; yields its port."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(TRAFFIC), "upstream", "--port", str(port), "--size", str(size)],
        preexec_fn=pin(HELPER_CPUS),
    )  # fmt: skip
    try:
        wait_for_port(port, process=process)
        yield port
    finally:
        process.terminate()
        process.wait()


def harness_options(origin: str, work: Path) -> list[str]:
    """`serve`'s `--set` pairs as a benchmark harness deploys it: a site map naming `origin` (written
    into `work`), an output directory in `work`."""
    config = work / "config.json"
    config.write_text(json.dumps({"environments": {"__SHOPPING__": {"urls": [origin]}}}))
    return [f"webarena_config={config}", f"webarena_output_dir={work / 'out'}"]


def start_load(
    proxy_port: int,
    url: str,
    *,
    connections: int,
    seconds: float,
    session: str | None = None,
    limit: int = 0,
    headers: Sequence[str] = (),
) -> subprocess.Popen[str]:
    """Start the load generator in its own process for `seconds` (or until `limit` answers)."""
    command = [sys.executable, str(TRAFFIC), "load", "--proxy-port", str(proxy_port), "--url", url,
               "--connections", str(connections), "--seconds", str(seconds),
               "--limit", str(limit)]  # fmt: skip
    if session:
        command += ["--session", session]
    for header in headers:
        command += ["--header", header]
    return subprocess.Popen(command, stdout=subprocess.PIPE, text=True, preexec_fn=pin(HELPER_CPUS))


def load_result(process: subprocess.Popen[str], *, timeout: float) -> dict[str, Any]:
    """The JSON summary a load generator printed when it ended."""
    out, _ = process.communicate(timeout=timeout)
    if process.returncode != 0:
        raise RuntimeError(f"load generator failed with {process.returncode}")
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def run_load(
    proxy_port: int,
    url: str,
    *,
    connections: int,
    seconds: float,
    session: str | None = None,
    limit: int = 0,
    headers: Sequence[str] = (),
) -> dict[str, Any]:
    """Run the load generator for `seconds` (or until `limit` answers) and wait for its summary."""
    process = start_load(proxy_port, url, connections=connections, seconds=seconds, session=session,
                         limit=limit, headers=headers)  # fmt: skip
    return load_result(process, timeout=seconds + 120)


def run_latency(proxy_ports: Sequence[int], url: str, *, seconds: float, session: str | None = None) -> Any:
    """Latency percentiles per proxy, one request at a time, the proxies taking turns (`bench_traffic`)."""
    command = [sys.executable, str(TRAFFIC), "latency", "--proxy-ports", ",".join(map(str, proxy_ports)),
               "--url", url, "--seconds", str(seconds)]  # fmt: skip
    if session:
        command += ["--session", session]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, preexec_fn=pin(HELPER_CPUS))
    return load_result(process, timeout=seconds + 120)


def control(port: int, method: str, path: str, body: Any = None, *, timeout: float = 120) -> Any:
    """One request to the control port; the decoded JSON answer."""
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
            [sys.executable, str(TRAFFIC), "replay", "--proxy-port", str(proxy_port), "--spec", file.name],
            check=True, preexec_fn=pin(HELPER_CPUS), timeout=1800,
        )  # fmt: skip
    finally:
        os.unlink(file.name)
