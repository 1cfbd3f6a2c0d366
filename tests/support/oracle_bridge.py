"""Asking the reference evaluator, in its own interpreter, for verdicts (tests/support/oracle_values.py), and
comparing them with ours.

`run_in_oracle` is `subprocess.run([oracle_python, *args])` served by interpreters that stay up
(tests/support/oracle_host.py): a short judgement's CPU is mostly the interpreter's start and the
reference's import, and the suites ask for hundreds. Each host runs one command at a time; the bridge
starts another when all are busy, and a host that overstays its timeout is killed, as a subprocess would be.
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import tempfile
import threading
from collections import Counter
from pathlib import Path
from typing import IO, Any

BRIDGE = Path(__file__).with_name("oracle_values.py")
NETWORK = Path(__file__).with_name("oracle_network.py")
HOST = Path(__file__).with_name("oracle_host.py")
KEPT_HOSTS = 4
"""Idle hosts kept per interpreter: as many as a test asks for at once (tests/support/threeway.py's
four threads); each holds the reference in memory."""


class _Host:
    """One interpreter of the oracle's, taking command lines on its stdin."""

    def __init__(self, oracle_python: Path) -> None:
        read, write = os.pipe()
        handle, log = tempfile.mkstemp(prefix="oracle-host-", suffix=".log")
        self.log = Path(log)  # what it writes to its own stdout and stderr, read when it dies
        self.process = subprocess.Popen(
            [str(oracle_python), str(HOST), str(write)], stdin=subprocess.PIPE, stdout=handle,
            stderr=subprocess.STDOUT, pass_fds=(write,), text=True,
        )  # fmt: skip
        os.close(write)
        os.close(handle)
        self.answers: IO[str] = os.fdopen(read, encoding="utf-8")

    def run(self, request: dict[str, Any], timeout: float) -> dict[str, Any]:
        """The answer; `TimeoutExpired` if it overstays `timeout`, `RuntimeError` if the host died (the
        caller closes it then)."""
        assert self.process.stdin is not None
        answer: list[str] = []
        reader = threading.Thread(target=lambda: answer.append(self.answers.readline()), daemon=True)
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        reader.start()
        reader.join(timeout)
        if reader.is_alive():
            raise subprocess.TimeoutExpired(request["args"], timeout)
        if not answer[0]:
            code = self.process.wait()
            raise RuntimeError(f"the oracle host exited ({code}) on {request['args']} (see {self.log})")
        reply: dict[str, Any] = json.loads(answer[0])
        return reply

    def close(self, *, keep_log: bool = False) -> None:
        self.process.kill()
        self.process.wait()
        self.answers.close()
        if not keep_log:
            self.log.unlink(missing_ok=True)


_idle: dict[Path, list[_Host]] = {}
_lock = threading.Lock()


def run_in_oracle(
    oracle_python: Path, args: list[str], *, input: str | None = None, cwd: Path | None = None,
    timeout: float = 300,
) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """`python ARGS` with the oracle's interpreter (text in and out, in the caller's folder and
    environment), on a host that stays up."""
    with _lock:
        idle = _idle.setdefault(Path(oracle_python), [])
        host = None
        while idle and host is None:
            host = idle.pop()
            if host.process.poll() is not None:  # died while idle
                host.close()
                host = None
    host = host or _Host(oracle_python)
    request = {"args": [str(arg) for arg in args], "input": input, "cwd": str(cwd or os.getcwd()),
               "env": dict(os.environ)}  # fmt: skip
    try:
        reply = host.run(request, timeout)
    except BaseException:  # its log kept: it says why
        host.close(keep_log=True)
        raise
    with _lock:
        kept = _idle[Path(oracle_python)]
        if len(kept) < KEPT_HOSTS:
            kept.append(host)
            host = None
    if host is not None:  # enough wait idle already
        host.close()
    return subprocess.CompletedProcess(
        [str(oracle_python), *args], reply["returncode"], reply["stdout"], reply["stderr"]
    )


@atexit.register
def _close_hosts() -> None:
    with _lock:
        for hosts in _idle.values():
            for host in hosts:
                host.close()
            hosts.clear()


def ask_oracle_network(oracle_python: Path, mode: str, request: Path) -> Any:
    """What tests/support/oracle_network.py answers in `mode` for the request file `request`."""
    done = run_in_oracle(oracle_python, [str(NETWORK), mode, str(request)], timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def ask_oracle(oracle_python: Path, request: dict[str, Any]) -> list[dict[str, Any]]:
    """The reference's verdicts for `request` (see tests/support/oracle_values.py for its modes)."""
    done = run_in_oracle(oracle_python, [str(BRIDGE)], input=json.dumps(request), timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    verdicts: list[dict[str, Any]] = json.loads(done.stdout)
    return verdicts


def report_differences(
    label: str, cases: list[dict[str, Any]], oracle: list[dict[str, Any]], ours: list[Any]
) -> list[str]:
    """One line per case where our (status, score) differs from the oracle's; prints the agreement."""
    differences = []
    for case, theirs, mine in zip(cases, oracle, ours, strict=True):
        if (theirs["status"], theirs["score"]) != tuple(mine):
            differences.append(
                f"task {case['task_id']} [{case['label']}] response={json.dumps(case['response'])[:300]}: "
                f"oracle {theirs['status']}/{theirs['score']} ({theirs['detail'][:200]}), "
                f"ours {mine[0]}/{mine[1]}"
            )
    agreed = len(cases) - len(differences)
    print(f"{label} agreement: {agreed}/{len(cases)}")
    print(f"{label} oracle verdicts: {dict(Counter(v['status'] for v in oracle))}")
    return differences
