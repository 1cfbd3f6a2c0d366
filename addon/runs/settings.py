"""What every attempt of a proxy is run with (`RunSettings`), and the states a session goes through."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from webarena_live.evaluator import SiteMap
from webarena_live.runs.journal import EntryFilter
from webarena_live.runs.redact import redact_har_entry


class SessionState(StrEnum):
    IDLE = "idle"
    """Traffic seen, no task started yet."""
    RUNNING = "running"
    FINISHED = "finished"


@dataclass(frozen=True, slots=True)
class RunSettings:
    """How every attempt is journaled, judged and written; replaced whole when the proxy is reconfigured.

    An attempt takes its journal and spool from the settings of its start, and is judged and written
    with the settings of its finish.
    """

    site_map: SiteMap = field(default_factory=SiteMap)
    output_dir: Path | None = None
    journal_dir: Path | None = None
    redact: bool = False
    """Leave cookies, credentials and passwords out of the written network.har and the journal."""
    data_checksum: str | None = None
    """The dataset's checksum, carried by every result."""

    @property
    def journal_filter(self) -> EntryFilter | None:
        return redact_har_entry if self.redact else None
