"""The `network.har` of a running session, assembled on disk while the session runs.

Serializing a 10,000-event trace takes far longer than evaluating it, and a
finish must answer at once. So each event's HAR entry — the very
text its journal line holds, serialized once at capture — is also appended to
a spool file laid out as a HAR document. Finishing only writes the closing
brackets and renames the spool over `OUT/<task_id>/network.har`: constant
time, still atomic (a reader sees the old file or the whole new one), and done
before the finish answers, so the files are in place when the agent hears
its verdict.

Spools live in `OUT/.spool/` (a name the reference tooling skips, as it skips
`.journal`), on the same filesystem as the task directories so the rename
stays atomic. Any write error abandons the spool; the caller then serializes
the trace the slow way. A spool's file is made only once its entries fill
its buffer (or at the finish): a session that ends without a finish — closed,
abandoned, never answered — after a few requests leaves no spool file at all,
where a file made at its first event stayed behind empty (its buffer never
written) until the proxy stopped.

Renaming over a large `network.har` of an earlier run would make the finish
wait while the filesystem frees the old file's blocks (tens of milliseconds
for a 10,000-event HAR on ext4 with `discard`). So the old file gets a second
name first (a hard link: the rename then frees nothing) and that name is
deleted on a background thread a little later, once the finish is over (a
deletion running during the finish stalls its other renames on the
filesystem's journal).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import logging
import os
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO

from webarena_live.evaluator import HAR_TAIL, RUN_FILE_MODE, har_head

SPOOL_SUBDIR = ".spool"

logger = logging.getLogger(__name__)


_HEAD = har_head().encode("ascii")
_TAIL = HAR_TAIL.encode("ascii")

SPOOL_BUFFER = 64 * 1024
"""Bytes of HAR entries gathered in memory before they go to the spool file."""

DELETE_DELAY = 0.25
"""Seconds before an old `network.har` replaced by a finish is deleted."""

_deleter: ThreadPoolExecutor | None = None


def delete_in_background(path: Path, *, delay: float = DELETE_DELAY) -> None:
    """Unlink `path` on a worker thread after `delay` seconds (the syscall releases the GIL)."""
    global _deleter
    if _deleter is None:
        _deleter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="webarena-live-delete")
    _deleter.submit(_delete_when_due, path, time.monotonic() + delay)


def _delete_when_due(path: Path, due: float) -> None:
    time.sleep(max(0.0, due - time.monotonic()))  # jobs run in order, so each waits at most `delay`
    path.unlink(missing_ok=True)


def _exchange(source: Path, target: Path) -> bool:
    """Swap two paths atomically (Linux `renameat2(RENAME_EXCHANGE)`); False where that is not available.

    Unlike a rename over an existing file, an exchange does not make ext4 flush
    the new file's data first (its `auto_da_alloc` safeguard): 0.1 ms instead
    of several for a 10,000-event HAR.
    """
    renameat2 = getattr(_libc(), "renameat2", None)
    if renameat2 is None:
        return False
    done = renameat2(_AT_FDCWD, os.fsencode(source), _AT_FDCWD, os.fsencode(target), _RENAME_EXCHANGE)
    return bool(done == 0)


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def replace_cheaply(source: Path, target: Path) -> None:
    """`os.replace(source, target)`, atomic as ever, without waiting on the filesystem for the old `target`.

    With an old `target`, the two are exchanged and the old file, now named
    `source`, is deleted later; where exchanging is not possible, the old file
    gets a second name (a hard link, so the rename frees nothing) that is
    deleted later. A missing `target` is a plain rename.
    """
    if target.exists() and _exchange(source, target):
        delete_in_background(source)
        return
    # The second name lives beside the spool file, not in the task directory, so a
    # crash before the delete never leaves a stray file among the outputs.
    old = source.with_name(f".{target.name}.{uuid.uuid4().hex}.old")
    try:
        os.link(target, old)
    except OSError:  # no old file, or a filesystem without hard links: a plain replace
        os.replace(source, target)
        return
    try:
        os.replace(source, target)
    finally:
        delete_in_background(old)


class HarSpool:
    """Appends HAR entries (JSON text, one per event) to a temporary HAR file; `commit` moves it into place.

    `redacted` records whether the entries went through the redaction filter, so a
    finish only uses the spool when it matches what the outputs must hold.
    """

    def __init__(self, directory: Path, *, label: str, redacted: bool) -> None:
        self.directory = directory
        self.label = label
        self.redacted = redacted
        self.entries = 0
        self.path: Path | None = None
        self._file: IO[bytes] | None = None
        self._pending: list[bytes] = []
        """The entries (each with its separator) before the file is made."""
        self._pending_bytes = 0
        self._broken = False

    @property
    def usable(self) -> bool:
        return not self._broken

    def add(self, entry_json: bytes) -> None:
        """Append one entry (JSON text without a trailing newline)."""
        if self._broken:
            return
        try:
            if self._file is None:
                if not self.entries:  # a folder that cannot be made gives up at once, as a file would
                    self.directory.mkdir(parents=True, exist_ok=True)
                self._pending += (b",\n" if self.entries else b"\n", entry_json)
                self._pending_bytes += len(entry_json) + 2
                self.entries += 1
                if self._pending_bytes >= SPOOL_BUFFER:
                    self._open()
                return
            self._file.write(b",\n" if self.entries else b"\n")
            self._file.write(entry_json)  # into the buffer as it is: no concatenated copy
            self.entries += 1
        except OSError as error:
            logger.warning("HAR spool %s abandoned (the HAR will be written at finish): %s", self.path, error)
            self.discard()
            self._broken = True

    def _open(self) -> None:
        """Make the spool file and write what was pending into it."""
        handle, name = tempfile.mkstemp(dir=self.directory, prefix=f"{self.label}-", suffix=".har.tmp")
        self.path = Path(name)
        os.fchmod(handle, RUN_FILE_MODE)  # it becomes network.har: shared like every run file
        # Buffered, unlike the journal: a spool is worthless after a crash (the
        # session cannot finish then), so it need not cost a syscall per event.
        self._file = os.fdopen(handle, "wb", buffering=SPOOL_BUFFER)
        self._file.write(_HEAD)
        self._file.writelines(self._pending)
        self._pending, self._pending_bytes = [], 0

    def commit(self, target: Path, *, expected_entries: int) -> bool:
        """Close the document and rename it to `target`; False (spool discarded) when it cannot.

        It cannot when it does not hold exactly `expected_entries` entries
        (an event it missed) or a write or the rename fails.
        """
        if self._broken or not self.entries or self.entries != expected_entries:
            self.discard()
            return False
        try:
            if self._file is None:
                self._open()
            assert self._file is not None
            self._file.write(_TAIL)
            self._file.close()
            self._file = None
            assert self.path is not None
            replace_cheaply(self.path, target)
        except OSError as error:
            logger.warning("HAR spool %s not committed (writing the HAR instead): %s", self.path, error)
            self.discard()
            return False
        self.path = None
        return True

    def discard(self) -> None:
        """Close and delete the spool file (a restarted, finished or closed session)."""
        self._pending, self._pending_bytes = [], 0
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None
        if self.path is not None:
            self.path.unlink(missing_ok=True)
            self.path = None
        self._broken = True
