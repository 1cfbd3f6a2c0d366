"""Garbage collection in `webarena-live serve`'s process, tuned for a long run with many flows.

Process-wide policy: only a host that owns its process applies it. `serve`
adds `ProcessMemory` to its mitmproxy and wraps every finish in `gc_paused`;
the webarena-live addon itself, loaded into someone else's mitmdump or
mitmweb, never touches the collector (docs/architecture.md, Process-wide policy).

Two things plain mitmproxy leaves to Python's defaults, which cost a proxy
that keeps every session's trace:

- *Start-up heap.* Modules, mitmproxy's addons and options, the task set,
  the evaluator's plans: tens of thousands of objects that live as long as the
  process, which every full collection walks again. `freeze_startup_heap`
  collects once and moves them to the permanent generation (`gc.freeze`), so
  collections only look at what was made since: events and flows. This is
  Python's documented remedy (`scripts/bench_proxy.py` reports `serve` with
  and without it).
- *Large bodies.* mitmproxy's flows die in reference cycles, so a finished
  flow — with its buffered body — is freed only when the cycle collector
  runs, and the collector is scheduled by counting objects, not bytes. With
  1 MB responses, hundreds of dead bodies would wait for it.
  `LargeBodyCollector` counts the bytes of large bodies that went through
  and collects once every `COLLECT_AFTER` bytes, then hands the freed heap
  back to the operating system (glibc's `malloc_trim`), so the proxy's
  memory stays flat whatever the body sizes.

Freezing has one cost: an object alive at start-up that later becomes
cyclic garbage is never collected. At start-up nothing is in flight, so
that is only what reconfiguring the proxy replaces (a task set loaded again).

`gc_paused` keeps collections out of a stretch an agent waits on (a finish).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import gc
import time
from collections.abc import Callable, Iterator

from mitmproxy import http

LARGE_BODY = 64 * 1024
"""Bodies from this size on count towards the next collection."""

COLLECT_AFTER = 32 * 1024 * 1024
"""Bytes of large bodies between two collections: the most memory dead flows may hold."""


def freeze_startup_heap() -> int:
    """Collect, then exempt everything alive now from future collections (`gc.freeze`); how many.

    Once per process: a process whose start-up heap is frozen already is left
    at that (a later freeze would catch connections in flight).
    """
    if not gc.get_freeze_count():
        gc.collect()
        gc.freeze()
    return gc.get_freeze_count()


def _malloc_trim() -> Callable[[], object] | None:
    """glibc's `malloc_trim(0)`, or None where the C library has no such call (musl, macOS)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return lambda: trim(0)


_trim = _malloc_trim()


def return_free_memory() -> None:
    """Give the heap's free pages back to the operating system, where the C library can."""
    if _trim is not None:
        _trim()


class LargeBodyCollector:
    """Collects garbage once every `collect_after` bytes of large bodies (see the module's docstring)."""

    def __init__(self, *, collect_after: int = COLLECT_AFTER) -> None:
        self.collect_after = collect_after
        self.pending = 0
        """Bytes of large bodies seen since the last collection."""
        self.stats: dict[str, float] = {"frozen_objects": 0, "large_body_collections": 0, "collect_ms": 0.0}
        """What the tuning did: objects frozen at start-up, collections after large bodies and their
        time in all (shown by `/health`)."""
        self._scheduled = False

    def note(self, size: int) -> None:
        """Count a body of `size` bytes (small ones are ignored)."""
        if size < LARGE_BODY:
            return
        self.pending += size
        if self.pending < self.collect_after or self._scheduled:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.collect()
            return
        # After the current loop turn: the flows that brought the bodies are done by then.
        self._scheduled = True
        loop.call_soon(self.collect)

    def collect(self) -> None:
        self._scheduled = False
        self.pending = 0
        started = time.perf_counter()
        gc.collect()
        return_free_memory()
        stats = self.stats
        stats["large_body_collections"] += 1
        stats["collect_ms"] = round(stats["collect_ms"] + (time.perf_counter() - started) * 1000, 3)


class ProcessMemory:
    """The mitmproxy addon `webarena-live serve` adds for the policy above: freezes the start-up heap
    once everything listens, and counts the bodies of every flow for `LargeBodyCollector` (told each
    flow by the live addon, `WebArenaLive.flow_done`: no hook dispatch of its own per flow)."""

    def __init__(self) -> None:
        self.collector = LargeBodyCollector()

    @property
    def stats(self) -> dict[str, float]:
        """What the tuning did (`LargeBodyCollector.stats`), for `/health`."""
        return self.collector.stats

    def running(self) -> None:
        if not self.stats["frozen_objects"]:
            self.stats["frozen_objects"] = freeze_startup_heap()

    def count_bodies(self, flow: http.HTTPFlow) -> None:
        """A flow whose answer (or error, without one) is in: its buffered bodies counted."""
        self.collector.note(_buffered(flow.request) + _buffered(flow.response))


def _buffered(message: http.Message | None) -> int:
    """Bytes of a message's buffered body (none when streamed)."""
    return len(message.data.content or b"") if message is not None else 0


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Keep Python's cyclic garbage collector out of a stretch an agent is waiting on (a finish).

    With a long session in memory a full collection takes milliseconds; it
    simply runs at the next allocation after the stretch instead.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
