#!/usr/bin/env python
"""The addon's share of a running proxy's CPU samples, by hook: a py-spy recording read back.

py-spy samples the proxy process from outside (no change to it, no cost in it but the reads) and
writes each sampled stack with its count (`--format raw`: frames outermost first, `;`-separated,
then the count). A sample with a frame of the project (`webarena_live/…`) above the event loop's
last frame (`Handle._run`, which runs every task step and callback) is the addon's; it is put under
the outermost such frame, which is the hook mitmproxy called (`WebArenaLive.response`,
`WebArenaLive.requestheaders`, …) or what the loop ran for the addon outside any hook
(`TurnWrites.flush`: a loop turn's captures and journal lines). The
functions below are counted once per sample they are on (inclusive), so the costly steps inside a
hook show by name. Idle samples (the loop waiting in `select`) are not taken: shares are of the
CPU the proxy used. Samples without the loop's frame (its own work between callbacks, the start and
the end of the process) are in the total only.

    .venv/bin/python scripts/hook_profile.py PID [--seconds S] [--rate HZ]

`scripts/bench_proxy.py --profile` records serve this way during its rounds and prints the same
table after its own.
"""

from __future__ import annotations

import argparse
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

PROJECT_FRAME = re.compile(r"\((?:.*/)?webarena_live/")
"""A frame of the project's code, whatever the install (editable, wheel) makes of its path."""
LOOP_FRAME = re.compile(r"\((?:.*/)?asyncio/events\.py:")
"""`Handle._run`: the event loop running a callback or a task's step; what runs above it is a hook's
(or a callback's) own work, and `serve`'s frames below it (its command line) are no hook."""
_FRAME = re.compile(r"^(?P<function>.*?) \((?P<file>[^()]*?)(?::\d+)?\)$")

Stack = tuple[str, ...]


CONTINUATIONS = 8
"""Lines one sample may span (frame names with line breaks); beyond, the text is no py-spy output."""


def parse_raw(text: str) -> Counter[Stack]:
    """py-spy's raw (collapsed) output as sample counts by stack, its frames outermost first. A frame
    name may hold a line break (code compiled from a string names itself with it), so a line without
    a count continues on the next, for a few lines; text that does not reach a count by then is an
    error (a file of another format)."""
    stacks: Counter[Stack] = Counter()
    pending: list[str] = []
    for number, line in enumerate(text.split("\n"), 1):
        if not pending and not line.strip():
            continue
        pending.append(line)
        frames, _, count = "\n".join(pending).rpartition(" ")
        if not count.isdigit():  # (a sample of a thread with no Python frame has no frames)
            if len(pending) > CONTINUATIONS:
                raise ValueError(f"line {number - len(pending) + 1} is not py-spy's raw format "
                                 f"(frames, a space, a count): {pending[0][:80]!r}")  # fmt: skip
            continue
        pending = []
        stacks[tuple(frames.split(";")) if frames else ()] += int(count)
    if pending and "".join(pending).strip():
        raise ValueError(
            f"not py-spy's raw format (frames, a space, a count) at the end: {pending[0][:80]!r}"
        )
    return stacks


def frame_name(frame: str) -> str:
    """`Class.function (path)` of a frame, its line number dropped and its path from the package on."""
    match = _FRAME.match(frame)
    if match is None:
        return frame
    path = match["file"]
    if (start := path.rfind("webarena_live/")) >= 0:
        path = path[start:]
    return f"{match['function']} ({path})"


@dataclass
class HookShares:
    """The samples of a recording: all of them, and the addon's by hook and by function."""

    total: int = 0
    by_hook: Counter[str] = field(default_factory=Counter)
    by_function: Counter[str] = field(default_factory=Counter)

    @property
    def addon(self) -> int:
        return sum(self.by_hook.values())


def hook_shares(stacks: Counter[Stack]) -> HookShares:
    """Each sample counted once in `total`; the addon's under its outermost project frame above the
    loop (the hook) and under every project function above that, once each."""
    shares = HookShares()
    for stack, count in stacks.items():
        shares.total += count
        turn = max((index for index, frame in enumerate(stack) if LOOP_FRAME.search(frame)), default=None)
        if turn is None:  # the loop itself (`select`), or the process starting or ending
            continue
        ours = [frame_name(frame) for frame in stack[turn + 1 :] if PROJECT_FRAME.search(frame)]
        if not ours:
            continue
        shares.by_hook[ours[0]] += count
        for name in set(ours[1:]):
            shares.by_function[name] += count
    return shares


def table(shares: HookShares, *, functions: int = 12) -> str:
    """The hooks by share of all samples, then the costliest project functions inside them."""
    if not shares.total:
        return "no samples (was the proxy busy while it was recorded?)"
    lines = [
        f"{shares.total:,} CPU samples of the proxy; the addon's: {shares.addon:,} "
        f"({shares.addon / shares.total:.1%})",
        "",
        "| addon hook (outermost frame of the project) | samples | share of all |",
        "| --- | ---: | ---: |",
    ]
    lines += [
        f"| {name} | {count:,} | {count / shares.total:.2%} |" for name, count in _ranked(shares.by_hook)
    ]
    lines += ["", "| inside the hooks (inclusive) | samples | share of all |", "| --- | ---: | ---: |"]
    lines += [
        f"| {name} | {count:,} | {count / shares.total:.2%} |"
        for name, count in _ranked(shares.by_function)[:functions]
    ]
    return "\n".join(lines)


def _ranked(counts: Counter[str]) -> list[tuple[str, int]]:
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))


def py_spy() -> str:
    """The py-spy beside this Python (the test extra installs it), else one on PATH."""
    beside = Path(sys.executable).parent / "py-spy"
    found = str(beside) if beside.exists() else shutil.which("py-spy")
    if found is None:
        raise SystemExit("py-spy is not installed: .venv/bin/uv pip install --python .venv/bin/python py-spy")
    return found


class Recording:
    """py-spy recording process `pid` (raw format, CPU samples only) from `start` until `stop`."""

    def __init__(self, pid: int, *, rate: int = 250) -> None:
        self.pid, self.rate = pid, rate
        self.output = Path(tempfile.mkstemp(prefix="hook-profile-", suffix=".txt")[1])
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> Recording:
        command = [py_spy(), "record", "--pid", str(self.pid), "--format", "raw", "--rate", str(self.rate),
                   "--nonblocking", "--output", str(self.output)]  # fmt: skip
        self._process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        return self

    def stop(self) -> Counter[Stack]:
        """End the recording (py-spy writes its file on SIGINT) and read it back."""
        assert self._process is not None
        self._process.send_signal(signal.SIGINT)
        try:
            _, errors = self._process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self._process.kill()
            raise
        try:
            text = self.output.read_text()
        finally:
            self.output.unlink(missing_ok=True)
        if not text.strip():
            raise RuntimeError(f"py-spy recorded nothing: {errors.decode(errors='replace').strip()}")
        return parse_raw(text)


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "pid", type=int, help="the proxy process (webarena-live serve, or mitmdump with the addon)"
    )
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rate", type=int, default=250, help="samples per second")
    args = parser.parse_args(None if argv is None else list(argv))
    recording = Recording(args.pid, rate=args.rate).start()
    try:
        time.sleep(args.seconds)
    finally:
        stacks = recording.stop()
    print(table(hook_shares(stacks)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
