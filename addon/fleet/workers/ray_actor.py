"""A worker of `serve --workers N --ray ADDRESS` on its node: a Ray actor holding one `webarena-live serve`.

The actor is the worker's parent: it keeps the worker's listening sockets (`addresses/listeners.py`)
and, when `serve` exits unasked, starts it again itself on the same sockets, so an agent's
connection during the restart waits in the backlog instead of being refused; the front learns of it
through `wait` and resumes the sessions. A worker keeps its ports and outputs in a folder of its
node's temp directory, so an actor Ray restarts on the same node (the actor process itself died)
starts `serve` again on the same ports; its journals are in a folder named after the front's output
directory (`WorkerSetup.journals`), which a stop keeps: `serve --ray` started again on the same
output directory finds them and resumes those sessions on request, as local `serve` does. Nothing is
assumed shared between nodes: the task and site files and the proxy's CA come in the worker's
`WorkerSetup`, and each finished session's files are read back through Ray (`read_outputs`).
`ray_workers.py` places and watches the actors. See docs/architecture.md, Ray.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ray

from webarena_live.addresses.listeners import ListenerKeeper
from webarena_live.evaluator import holding_run_dir, write_text_atomically
from webarena_live.fleet.workers.local import RESTART_PAUSE, RESTART_PAUSE_MAX, end_with_parent
from webarena_live.launch import LaunchError, Ports, ServeProcess, free_ports

logger = logging.getLogger("webarena_live.fleet")

STATE_DIR = "webarena-live-ray"
"""Under the node's temp directory: `<fleet id>/worker-<index>/<node id>/` holds a worker's ports and
outputs for one run of the fleet, `journals/<journals>/<node id>/` the journals, kept across runs."""
RESTART_WAIT = 30.0
"""Seconds a restarted actor retries its ports (its predecessor's `serve` may still be stopping)."""
POLL = 0.5


@dataclass(frozen=True)
class WorkerSetup:
    """What every worker is started with, carried to its node by Ray."""

    fleet: str
    """This run of the fleet's id: names the workers' state folders, so two fleets never mix."""
    args: tuple[tuple[str, ...], ...]
    """Each worker's `serve` flags, without ports, output and journal folders, and the files below."""
    files: dict[str, tuple[str, bytes]] = field(default_factory=dict)
    """Flag -> (file name, content): the task and site files, written on the node."""
    ca: dict[str, bytes] = field(default_factory=dict)
    """mitmproxy's CA files, so a browser that trusts one worker trusts all."""
    env: dict[str, str] = field(default_factory=dict)
    listen_host: str | None = None
    """Where the worker's ports listen; None: its node's address."""
    journals: str = ""
    """Names the journals' folder on each node: the same for every run on one output directory."""


class ServeWorker:
    """A Ray actor: one `webarena-live serve` on this node (`ray.remote` is applied by `RayWorkers`)."""

    def __init__(self, index: int, setup: WorkerSetup) -> None:
        context = ray.get_runtime_context()
        self.node = context.get_node_id()
        self.host = setup.listen_host or ray.util.get_node_ip_address()
        self.instance = uuid.uuid4().hex
        """This actor process: an answer from the same instance after a silence means contact was
        lost, not the worker."""
        base = Path(tempfile.gettempdir()) / STATE_DIR
        self.root = base / setup.fleet / f"worker-{index}" / self.node
        record = self.root / "worker.json"
        self.resumed = record.is_file()
        """True when this node ran this worker before (Ray restarted the actor): same ports, journals."""
        self.stopping = False
        self.deaths = 0
        """Times `serve` exited unasked (and was started again here)."""
        self.up = False
        self._changed = threading.Condition()
        self.keeper = ListenerKeeper()
        try:
            if self.resumed:
                ports = Ports(**json.loads(record.read_text())["ports"])
            else:
                ports = Ports(*free_ports(3, self.host))
                self.root.mkdir(parents=True, exist_ok=True)
                record.write_text(json.dumps({"ports": ports.__dict__}))
            self.output_dir = self.root / "out"
            self.journal_dir = base / "journals" / (setup.journals or setup.fleet) / self.node
            self.argv = self._argv(index, setup)
            self.ports, self.env = ports, setup.env
            self.process = self._process(first=not self.resumed)
            self._start()
            if self.process.ports != self.ports:  # one was taken since the draw: the new ones are kept
                self.ports = self.process.ports
                write_text_atomically(record, json.dumps({"ports": self.ports.__dict__}))
        except BaseException:
            if getattr(self, "process", None) is not None:
                self.process.stop()  # started, then its ports could not be written down
            self.keeper.close()
            if not self.resumed:  # a failed first start leaves nothing behind
                self._forget()
                with contextlib.suppress(OSError, AttributeError):  # the journals' folders, if empty
                    self.journal_dir.rmdir()
                    self.journal_dir.parent.rmdir()
            raise
        self.up = True
        threading.Thread(target=self._keep_running, daemon=True, name="serve-watcher").start()

    def _argv(self, index: int, setup: WorkerSetup) -> list[str]:
        journal = f"webarena_journal_dir={self.journal_dir}"
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
        return argv

    def _process(self, *, first: bool = False) -> ServeProcess:
        # Only a first start may draw new ports (another program took one since the draw): the front
        # learns them from `where()` afterwards. A restart keeps the ports its sessions lead to.
        return ServeProcess(
            *self.argv, ports=self.ports, host=self.host, env=self.env, inherit_output=True,
            own_session=True, preexec_fn=end_with_parent, keeper=self.keeper, redraw=first,
        )  # fmt: skip

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

    def _keep_running(self) -> None:
        """Start `serve` again on the kept sockets whenever it exits unasked (ever more slowly while
        it fails to start); `wait` callers learn of each death and of each return."""
        while not self.stopping:
            assert self.process.process is not None
            code = self.process.process.wait()
            if self.stopping:
                return
            logger.warning("webarena-live: worker serve (pid %s) exited with code %s; starting it again",
                           self.process.pid, code)  # fmt: skip
            with self._changed:
                self.deaths, self.up = self.deaths + 1, False
                self._changed.notify_all()
            pause = RESTART_PAUSE
            while not self.stopping:
                time.sleep(pause)
                self.process = self._process()
                try:
                    self.process.start()
                    break
                except LaunchError as error:
                    logger.error("webarena-live: worker serve did not start again: %s", error)
                    pause = min(pause * 2, RESTART_PAUSE_MAX)
            with self._changed:
                self.up = not self.stopping
                self._changed.notify_all()

    def where(self) -> dict[str, Any]:
        """Where this worker runs, how to reach it, and whether its `serve` answers now."""
        return {
            "node": self.node, "host": self.host, "ports": self.ports.__dict__,
            "pid": self.process.process.pid if self.process.process is not None else None,
            "resumed": self.resumed, "output_dir": str(self.output_dir), "instance": self.instance,
            "deaths": self.deaths, "up": self.up,
            "actor_pid": os.getpid(),  # the pid Ray names this worker by in the lines it passes on
        }  # fmt: skip

    def wait(self, instance: str, deaths: int, up: bool, timeout: float) -> dict[str, Any]:
        """`where()` at once if the caller knows another `instance` (Ray restarted this actor: the
        caller must learn of it now, not after `timeout`), else once `serve` died more than `deaths`
        times, or (`up`) once it answers again; at the latest after `timeout` seconds (the caller asks
        again: a silence is then contact lost)."""
        with self._changed:
            self._changed.wait_for(
                lambda: instance != self.instance or self.deaths > deaths or (up and self.up), timeout
            )
        return self.where()

    def drop_port(self, port: int) -> None:
        """The listener kept for `port` is no session's any more (its session is lost)."""
        self.keeper.drop(port)

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
        """Stop `serve` as Ctrl-C does and forget this run's ports and outputs on this node; the
        journals stay (a later `serve --ray` on the same output directory resumes from them)."""
        self.stopping = True
        code = self.process.stop()
        self.keeper.close()
        self._forget()
        return code

    def _forget(self) -> None:
        shutil.rmtree(self.root.parent, ignore_errors=True)
        with contextlib.suppress(OSError):  # the fleet's folder, once its last worker on this node is gone
            self.root.parent.parent.rmdir()
