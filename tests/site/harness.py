"""Helpers the live end-to-end tests share: the proxy process, the control
API client, the browser settings and the oracle run.

The proxy runs as a real `webarena-live serve` subprocess on free ports; the
oracle (webarena-verified 1.2.3) runs as a subprocess of its own venv's Python.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import requests
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from scripts.support.site_config import write_config as write_config  # theirs, shared with the benchmarks
from tests.support.oracle_bridge import run_in_oracle
from webarena_live.commands.cli import addon_path
from webarena_live.demo.command import CHROMIUM_ARGS as DEMO_CHROMIUM_ARGS
from webarena_live.launch import PORT_DRAWS, PORT_TAKEN, LaunchError, Ports, ServeProcess, free_ports

REPO = Path(__file__).resolve().parents[2]
TASKS_FILE = Path(__file__).resolve().parent / "tasks.json"
RESERVED_HOST = "webarena-live.invalid"

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = tuple(DEMO_CHROMIUM_ARGS)

# The reference refuses a dataset that does not hold exactly this many tasks.
REFERENCE_TASK_COUNT = 812


def free_port() -> int:
    return free_ports(1)[0]


# -- the proxy ---------------------------------------------------------------


@dataclass
class ControlClient:
    """The control API, reached directly on the control port."""

    base: str
    http: requests.Session = field(default_factory=requests.Session)

    def get(self, path: str, *, timeout: float = 10) -> requests.Response:
        return self.http.get(self.base + path, timeout=timeout)

    def post(self, path: str, body: Any = None, *, timeout: float = 30) -> requests.Response:
        if not (path.startswith("/sessions/") and path.endswith("/finish")):
            return self.http.post(self.base + path, json=body, timeout=timeout)
        # Every live test's finish checks the preview's promise on its way: a preview with the same body
        # just before gives the finish's document marked `preview`, or the finish's own refusal.
        return finish_with_preview(self.http, self.base + path[: -len("/finish")], body, timeout=timeout)

    def start(self, task_id: int, session: str | None = None, *, restart: bool = False) -> dict[str, Any]:
        body: dict[str, Any] = {"task_id": task_id}
        if session is not None:
            body["session"] = session
        if restart:
            body["restart"] = True
        reply = self.post("/sessions", body)
        assert reply.status_code in (200, 201), f"POST /sessions {body}: {reply.status_code} {reply.text}"
        started: dict[str, Any] = reply.json()
        return started

    def finish(self, session: str, response: Any) -> dict[str, Any]:
        reply = self.post(f"/sessions/{session}/finish", response)
        assert reply.status_code == 200, f"finish {session}: {reply.status_code} {reply.text}"
        result: dict[str, Any] = reply.json()
        return result

    def trace(self, session: str) -> list[dict[str, Any]]:
        reply = self.get(f"/sessions/{session}/trace")
        assert reply.status_code == 200, f"trace {session}: {reply.status_code} {reply.text}"
        return trace_events(reply.json())

    def settled_trace(self, session: str, *, quiet: float = 0.5) -> list[dict[str, Any]]:
        """The session's trace once two reads `quiet` seconds apart agree (an exchange still open when
        its client left is recorded a moment later)."""
        last = self.trace(session)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            time.sleep(quiet)
            now = self.trace(session)
            if now == last:
                return now
            last = now
        raise AssertionError(f"the trace of {session!r} kept changing for 10 s")


def finish_with_preview(
    http: Any, session_url: str, answer: Any, *, timeout: float = 30, **kwargs: Any
) -> requests.Response:
    """`POST {session_url}/finish`, preceded by a preview with the same body that must say what the
    finish then did (`check_preview`). The session's counts are read before the preview and after the
    finish: a browser closed just before may still have connections whose end the proxy records between
    the two (an unanswered request), and then the two documents may rightly differ."""
    before = _counts(http, session_url, timeout, **kwargs)
    preview = http.post(f"{session_url}/preview", json=answer, timeout=timeout, **kwargs)
    reply = http.post(f"{session_url}/finish", json=answer, timeout=timeout, **kwargs)
    between = _counts(http, session_url, timeout, **kwargs) != before
    check_preview(preview, reply, traffic_between=between)
    return reply


def _counts(http: Any, session_url: str, timeout: float, **kwargs: Any) -> Any:
    view = http.get(session_url, timeout=timeout, **kwargs)
    return view.json().get("counts") if view.status_code == 200 else view.status_code


def check_preview(
    preview: requests.Response, finish: requests.Response, *, traffic_between: bool = False
) -> None:
    """The preview said what the finish then did: the same document (but the flag), or the same refusal.
    With `traffic_between` (the session's trace grew between the two) only the status is compared."""
    PREVIEW_CHECKS.append(preview.status_code)
    if finish.status_code == 200:
        assert preview.status_code == 200, f"preview {preview.status_code} {preview.text}; finish succeeded"
        previewed = preview.json()
        assert previewed.pop("preview", None) is True, previewed
        if traffic_between:
            PREVIEWS_OVERTAKEN.append(previewed.get("task_id"))
            return
        done = finish.json()
        if interference_grew(previewed.get("interference"), done.get("interference")):
            previewed["interference"] = done["interference"]
        assert previewed == done, f"preview {previewed} != finish {finish.text}"
    elif 400 <= finish.status_code < 500:  # refused (state, body, session): the preview was refused alike
        assert (preview.status_code, preview.json().get("error")) == (
            finish.status_code,
            finish.json().get("error"),
        ), f"preview {preview.status_code} {preview.text}; finish {finish.status_code} {finish.text}"


def interference_grew(previewed: Any, finished: Any) -> bool:
    """Whether the finish names every change the preview named, in their order, and more, with the count
    grown by as many and the rest as it was: other sessions' changes to the shared copy recorded between
    the two (a browser closed just before may still send one, as DokuWiki's edit page does when it is
    left). The pool lists changes by when they were sent, so a late one may come before others."""
    if not isinstance(previewed, dict) or not isinstance(finished, dict) or previewed == finished:
        return False
    before, after = previewed.get("mutations", []), finished.get("mutations", [])
    added = len(after) - len(before)
    remaining = iter(after)
    kept_in_order = all(any(change == later for later in remaining) for change in before)
    rest = {key: value for key, value in previewed.items() if key not in ("mutations", "count", "exposed")}
    return (
        added > 0
        and kept_in_order
        and finished.get("count") == previewed.get("count", 0) + added
        and finished.get("exposed") is True
        and rest == {key: value for key, value in finished.items() if key in rest}
        and set(finished) == set(previewed)
    )


PREVIEW_CHECKS: list[int] = []
"""Each preview-before-finish checked in this process, by the preview's status (tests count them)."""
PREVIEWS_OVERTAKEN: list[Any] = []
"""The previews whose session's trace grew before the finish (their documents were not compared)."""


def trace_events(body: Any) -> list[dict[str, Any]]:
    """The event list of a /trace answer: a bare list, or an object holding `events`."""
    if isinstance(body, dict):
        body = body.get("events")
    assert isinstance(body, list), f"trace answer holds no event list: {str(body)[:300]}"
    return body


class ProxyProcess(ServeProcess):
    """The proxy of a live test: `ServeProcess` with the test's output and mitmproxy directories."""

    output_dir: Path
    confdir: Path
    """mitmproxy's configuration directory, where it keeps its CA."""

    @property
    def control(self) -> ControlClient:  # type: ignore[override]
        return ControlClient(self.control_url)

    @property
    def port(self) -> int:
        return self.ports.proxy

    @property
    def session_port(self) -> int:
        return self.ports.session

    @property
    def control_port(self) -> int:
        return self.ports.control

    @property
    def log_file(self) -> Path:
        return self.log


def start_proxy(
    workdir: Path,
    *,
    tasks: Path,
    config: Path,
    extra_options: Sequence[str] = (),
    extra_args: Sequence[str] = (),
    plain_mitmdump: bool = False,
    timeout: float = 90,
) -> ProxyProcess:
    """Run the proxy on free ports and wait until the control port's /health answers.

    By default through the CLI (`webarena-live serve`); with `plain_mitmdump`
    as plain mitmproxy loading the addon script (`mitmdump -s "$(webarena-live addon-path)"`),
    the other way the addon is meant to be loaded. `extra_options` are `--set` pairs,
    `extra_args` more arguments of the command line.
    """
    output_dir = workdir / "out"
    confdir = workdir / "mitmproxy"  # keeps mitmproxy's CA out of the user's home
    workdir.mkdir(parents=True, exist_ok=True)
    sets = [
        arg for option in (f"confdir={confdir}", *extra_options) for arg in ("--set", option)
    ]  # fmt: skip
    # The ports are drawn here (plain mitmdump names them in its own arguments): drawn again when
    # another process of the suite took one between the draw and the proxy's bind.
    for draw in range(1, PORT_DRAWS + 1):
        ports = Ports(*free_ports(3))
        if plain_mitmdump:
            args = [
                "-q", "-s", addon_path(),
                "--mode", f"regular@{ports.proxy}", "--mode", f"regular@{ports.session}",
                "--set", f"webarena_session_port={ports.session}",
                "--set", f"webarena_tasks={tasks}",
                "--set", f"webarena_config={config}",
                "--set", f"webarena_output_dir={output_dir}",
                "--set", f"webarena_control_port={ports.control}",
            ]  # fmt: skip
            command: list[str] | None = [str(Path(sys.executable).parent / "mitmdump")]
        else:
            args = ["--tasks", str(tasks), "--config", str(config), "--output-dir", str(output_dir)]
            command = None
        proxy = ProxyProcess(
            *args, *sets, *extra_args, ports=ports, cwd=workdir, log=workdir / "proxy.log", command=command
        )
        proxy.output_dir, proxy.confdir = output_dir, confdir
        try:
            return proxy.start(timeout=timeout)  # type: ignore[return-value]
        except LaunchError as error:
            if PORT_TAKEN in str(error).lower() and draw < PORT_DRAWS:
                continue
            raise AssertionError(str(error)) from None
    raise AssertionError("unreachable: the last draw raises")


def ca_spki_pin(confdir: Path) -> str:
    """The SPKI pin of mitmproxy's CA, for Chromium's `--ignore-certificate-errors-spki-list`.

    A Chromium started with it trusts certificates issued by this proxy's CA
    (and nothing else that its own store does not), without touching any
    certificate store.
    """
    ca = x509.load_pem_x509_certificate((confdir / "mitmproxy-ca-cert.pem").read_bytes())
    spki = ca.public_key().public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo)
    return base64.b64encode(hashlib.sha256(spki).digest()).decode()


def wait_for(predicate: Any, *, timeout: float = 10, interval: float = 0.05, what: str = "condition") -> Any:
    """Poll until `predicate()` is truthy; return its value or fail naming `what`."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


# -- verdict parity with the oracle -----------------------------------------


@dataclass(frozen=True)
class LiveFinish:
    """One finished session: what the live proxy said, and a copy of its outputs."""

    label: str
    task_id: int
    live_status: str
    snapshot: Path
    """A directory holding <task_id>/agent_response.json and network.har."""
    browser_har: Path | None = None
    """Playwright's own HAR of the run (None: no browser, or none recorded)."""
    cache: str = "off"
    """The browser's HTTP cache: `on` (the session's own address) or `off` (proxy credentials)."""
    browser_differs: tuple[str, str] | None = None
    """(the reference's verdict on the browser's HAR, why) where a test knows it is not the live one."""


class FinishRecorder:
    """Copies each finished session's outputs aside before another run of the
    same task overwrites them, so the oracle can judge every one later; keeps
    the browser's own HAR of each session's context beside (`browser_har_for`)."""

    def __init__(self, root: Path, *, cache: str = "off") -> None:
        self.root = root
        self.cache = cache
        self.finishes: list[LiveFinish] = []
        self._browser_hars: dict[str, Path] = {}
        self._har_count = 0

    def browser_differs(self, label: str, verdict: str, why: str) -> None:
        """Say that the reference judges the browser's HAR of `label`'s last finish `verdict`, and why."""
        finish = next(f for f in reversed(self.finishes) if f.label == label)
        self.finishes[self.finishes.index(finish)] = replace(finish, browser_differs=(verdict, why))

    def browser_har_for(self, session: str) -> Path:
        """Where a browser context of `session` records its HAR (`record_har_path`), a new file each call."""
        self._har_count += 1
        path = self.root / "browser-hars" / f"{session}-{self._har_count}.har"
        path.parent.mkdir(parents=True, exist_ok=True)
        self._browser_hars[session] = path
        return path

    def record(
        self, label: str, output_dir: Path, task_id: int, live_result: Mapping[str, Any]
    ) -> LiveFinish:
        # Runs of the same task go to different snapshot directories: the
        # oracle evaluates a whole directory of <task_id>/ folders at a time.
        generation = sum(1 for finish in self.finishes if finish.task_id == task_id)
        snapshot = self.root / f"run{generation}"
        target = snapshot / str(task_id)
        target.mkdir(parents=True, exist_ok=False)
        for name in ("agent_response.json", "network.har"):
            shutil.copy2(output_dir / str(task_id) / name, target / name)
        har = self._browser_hars.pop(label, None)
        finish = LiveFinish(label, task_id, str(live_result["status"]), snapshot,
                            har if har is not None and har.exists() else None, self.cache)  # fmt: skip
        self.finishes.append(finish)
        return finish


def oracle_dataset(official: Path, ours: Path, dest: Path) -> Path:
    """Our tasks plus enough official ones to make the 812 the reference insists on."""
    own = json.loads(ours.read_text())
    official_tasks = json.loads(official.read_text())
    own_ids = {task["task_id"] for task in own}
    filler = [task for task in official_tasks if task["task_id"] not in own_ids]
    merged = own + filler[: REFERENCE_TASK_COUNT - len(own)]
    dest.write_text(json.dumps(merged))
    return dest


def oracle_verdicts(oracle_python: Path, output_dir: Path, config: Path) -> dict[int, dict[str, Any]]:
    """Run `webarena-verified eval-tasks` on a directory; its eval_result.json per task."""
    args = ["-m", "webarena_verified", "eval-tasks", "--output-dir", str(output_dir), "--config", str(config)]
    run = run_in_oracle(oracle_python, args)
    assert run.returncode == 0, (
        f"oracle eval-tasks failed ({run.returncode}):\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    )
    verdicts: dict[int, dict[str, Any]] = {}
    for task_dir in output_dir.iterdir():
        result_file = task_dir / "eval_result.json"
        if task_dir.is_dir() and result_file.exists():
            verdicts[int(task_dir.name)] = json.loads(result_file.read_text())
    return verdicts
