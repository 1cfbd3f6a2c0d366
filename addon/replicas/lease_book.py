"""The lease book: every lease the pool granted, held or ended, one small file a session, so a restart
(even after SIGKILL) knows which leases ended and never grants them again (docs/architecture.md,
Leases).

The pool writes a session's record at each transition of its lease (granted, ended) before anyone can
see it (`ReplicaPool._grant`, `ReplicaPool.end_lease`), atomically, in `<pool dir>/.leases/`. One file
a session keeps a transition's cost the same however many sessions are open; a restart reads them all
once. A finished session's record is dropped: it cannot be resumed.
"""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path
from urllib.parse import quote, unquote

from pydantic import ValidationError

from webarena_live.evaluator import write_json_atomically
from webarena_live.replicas.lease import Lease
from webarena_live.replicas.records import LeaseRecord

logger = logging.getLogger("webarena_live.replicas")

BOOK_DIR = ".leases"
"""The book's folder, beside the pool's state file (`OUT/.leases/`)."""


class LeaseBook:
    """The records on disk; without a folder (a pool with no state file) it keeps nothing."""

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder
        self._made = False
        self._made_for: str | None = None
        """The session whose record made the folder, while that record is the folder's only one."""

    def _path(self, session: str) -> Path:
        assert self.folder is not None
        return self.folder / f"{quote(session, safe='')}.json"

    def write(self, lease: Lease) -> None:
        """Keep `lease`'s record as it is now; a folder that cannot be written is told and costs what a
        restart would remember."""
        if self.folder is None:
            return
        try:
            if not self._made:
                self._made_for = lease.session if not self.folder.is_dir() else None
                self.folder.mkdir(parents=True, exist_ok=True)
                self._made = True
            elif self._made_for != lease.session:
                self._made_for = None  # another record: the folder is no longer one lease's
            write_json_atomically(self._path(lease.session), LeaseRecord.of(lease).book_document())
        except OSError as error:
            logger.warning("cannot keep session %s's lease in %s: %s", lease.session, self.folder, error)

    def drop(self, session: str, *, granted_last: bool = False) -> None:
        """Forget `session`'s record. `granted_last`: its lease was the last one granted and went unused
        (a refused start), so a folder its record made goes too: the disk is as it was before."""
        if self.folder is None:
            return
        try:
            self._path(session).unlink(missing_ok=True)
        except OSError as error:
            logger.warning("cannot drop session %s's lease from %s: %s", session, self.folder, error)
            return
        if self._made_for == session:
            self._made_for = None
            if granted_last:
                with contextlib.suppress(OSError):  # someone else's file in it: it stays
                    self.folder.rmdir()
                    self._made = False

    def all(self) -> dict[str, Lease]:
        """Every record kept, by session; a file that cannot be read is skipped (and told)."""
        if self.folder is None or not self.folder.is_dir():
            return {}
        found = {}
        for path in sorted(self.folder.glob("*.json")):
            try:  # a record of the last release reads as it was written (`LeaseRecord`)
                lease = LeaseRecord.model_validate_json(path.read_bytes()).lease()
            except (OSError, ValidationError) as error:  # unreadable, damaged, not JSON
                logger.warning("the lease record %s cannot be read: skipped (%s)", path, _why(error))
                continue
            found[lease.session or unquote(path.stem)] = lease
        return found


def _why(error: OSError | ValidationError) -> str:
    """What is wrong with a record, on one line."""
    if isinstance(error, OSError):
        return str(error)
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'record'}: {e['msg']}" for e in error.errors())
