"""A worker of `serve --workers N --ray ADDRESS` on its node: a Ray actor holding one `webarena-live serve`.

A worker keeps what it needs to come back in a folder of its node's temp directory (its ports, its
journals, its outputs), so an actor Ray restarts on the same node starts `serve` again on the same
ports and its running sessions resume from their journals; an actor restarted on another node (its
node left the cluster) starts afresh. Nothing is assumed shared between nodes: the task and site files
and the proxy's CA come in the worker's `WorkerSetup`, and each finished session's files are read back
through Ray (`read_outputs`). `ray_pool.py` places and watches the actors. See docs/architecture.md, Ray.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ray

from webarena_live.evaluator import holding_run_dir
from webarena_live.fleet.workers import end_with_parent
from webarena_live.launch import LaunchError, Ports, ServeProcess, free_ports

logger = logging.getLogger("webarena_live.fleet")

STATE_DIR = "webarena-live-ray"
"""Under the node's temp directory: `<fleet id>/worker-<index>/<node id>/` holds a worker's state."""
RESTART_WAIT = 30.0
"""Seconds a restarted actor retries its ports (its predecessor's `serve` may still be stopping)."""
POLL = 0.5


@dataclass(frozen=True)
class WorkerSetup:
    """What every worker is started with, carried to its node by Ray."""

    fleet: str
    """This fleet's id: names the workers' state folders, so two fleets on one node never mix."""
    args: tuple[tuple[str, ...], ...]
    """Each worker's `serve` flags, without ports, output and journal folders, and the files below."""
    files: dict[str, tuple[str, bytes]] = field(default_factory=dict)
    """Flag -> (file name, content): the task and site files, written on the node."""
    ca: dict[str, bytes] = field(default_factory=dict)
    """mitmproxy's CA files, so a browser that trusts one worker trusts all."""
    env: dict[str, str] = field(default_factory=dict)
    listen_host: str | None = None
    """Where the worker's ports listen; None: its node's address."""


class ServeWorker:
    """A Ray actor: one `webarena-live serve` on this node (`ray.remote` is applied by the pool)."""

    def __init__(self, index: int, setup: WorkerSetup) -> None:
        context = ray.get_runtime_context()
        self.node = context.get_node_id()
        self.host = setup.listen_host or ray.util.get_node_ip_address()
        self.root = Path(tempfile.gettempdir()) / STATE_DIR / setup.fleet / f"worker-{index}" / self.node
        record = self.root / "worker.json"
        self.resumed = record.is_file()
        """True when this node ran this worker before (Ray restarted the actor): same ports, journals."""
        if self.resumed:
            ports = Ports(**json.loads(record.read_text())["ports"])
        else:
            ports = Ports(*free_ports(3, self.host))
            self.root.mkdir(parents=True, exist_ok=True)
            record.write_text(json.dumps({"ports": ports.__dict__}))
        self.output_dir = self.root / "out"
        journal = f"webarena_journal_dir={self.root / 'journal'}"
        argv = [*setup.args[index], "--output-dir", str(self.output_dir), "--listen-host", self.host,
                "--control-host", self.host, "--set", journal]  # fmt: skip
        for flag, (name, content) in setup.files.items():
            path = self.root / "files" / f"{flag.strip('-')}-{name}"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
            argv += [flag, str(path)]
        if setup.ca:
            confdir = self.root / "mitmproxy"
            confdir.mkdir(parents=True, exist_ok=True)
            for name, content in setup.ca.items():
                (confdir / name).write_bytes(content)
            argv += ["--set", f"confdir={confdir}"]
        self.stopping = False
        self.process = ServeProcess(
            *argv, ports=ports, host=self.host, env=setup.env, inherit_output=True, own_session=True,
            preexec_fn=end_with_parent,
        )  # fmt: skip
        self._start()

    def _start(self) -> None:
        """Start `serve`; a restarted actor retries while its predecessor's child frees the ports."""
        deadline = time.monotonic() + RESTART_WAIT
        while True:
            try:
                self.process.start()
                return
            except LaunchError:
                if not self.resumed or time.monotonic() > deadline:
                    raise
                time.sleep(POLL)

    def where(self) -> dict[str, Any]:
        """Where this worker runs and how to reach it."""
        return {
            "node": self.node, "host": self.host, "ports": self.process.ports.__dict__,
            "pid": self.process.pid, "resumed": self.resumed, "output_dir": str(self.output_dir),
            "actor_pid": os.getpid(),  # the pid Ray names this worker by in the lines it passes on
        }  # fmt: skip

    def wait(self) -> int | None:
        """Returns when `serve` exits. Exiting unasked, it takes the actor with it: Ray then restarts
        the actor, which starts `serve` again and its sessions resume."""
        assert self.process.process is not None
        code = self.process.process.wait()
        if not self.stopping:
            logger.warning("webarena-live: worker serve exited with code %s; restarting its actor", code)
            os._exit(1)
        return code

    def read_outputs(self, paths: list[str]) -> dict[str, bytes]:
        """The bytes of a finished session's files, by path, read while no finish of this node moves
        them (only files under this worker's outputs; a file moved aside already is missing)."""
        found: dict[str, bytes] = {}
        if not paths:
            return found
        with holding_run_dir(Path(paths[0]).parent):
            for path in paths:
                resolved = Path(path).resolve()
                if self.output_dir.resolve() in resolved.parents and resolved.is_file():
                    found[path] = resolved.read_bytes()
        return found

    def stop(self) -> int | None:
        """Stop `serve` as Ctrl-C does, and forget this worker's state on this node."""
        self.stopping = True
        code = self.process.stop()
        shutil.rmtree(self.root.parent, ignore_errors=True)
        with contextlib.suppress(OSError):  # the fleet's folder, once its last worker on this node is gone
            self.root.parent.parent.rmdir()
        return code
