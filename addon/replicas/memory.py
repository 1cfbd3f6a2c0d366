"""What the pool remembers across a restart (`OUT/.pool.json`, or beside the journals without an output
directory): per replica whether it is changed, resetting or out of service, and the reset counters the
run report reads. Written atomically (`write_json_atomically`) each time one of them changes, so a
`serve` killed at any moment (SIGTERM or SIGKILL) leaves the last state whole; the next `serve` on the
same file resets every replica it names before leasing it (`ReplicaPool.restore`). A replica is named by
its site, index and URL: a map that changed since forgets what no longer matches.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from webarena_live.evaluator import placeholder, site_key
from webarena_live.replicas.state import ReplicaState, SiteCounters

logger = logging.getLogger("webarena_live.replicas")


def state_dir() -> Path:
    """The per-user state directory (`$XDG_STATE_HOME/webarena-live`, else `~/.local/state/webarena-live`):
    where journals and the pool's memory go without an output directory."""
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "webarena-live"


def replica_record(replica: ReplicaState) -> dict[str, Any]:
    return {
        "index": replica.index,
        "url": replica.url,
        "dirty": replica.dirty,
        "resetting": replica.resetting,
        "out_of_service": replica.out_of_service,
        "failing": replica.failing,
    }


def read_document(path: Path) -> dict[str, Any]:
    """The document kept in `path`; empty when there is none or it cannot be read (nothing to remember)."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return document if isinstance(document, dict) else {}


def needing_reset(document: dict[str, Any], replicas: dict[str, list[ReplicaState]]) -> list[ReplicaState]:
    """The replicas `document` says were changed, resetting or out of service when it was written."""
    found = []
    for name, records in (document.get("replicas") or {}).items():
        site = site_key(str(name))
        if site not in replicas or not isinstance(records, list):
            continue
        for record in records:
            if not isinstance(record, dict) or not isinstance(index := record.get("index"), int):
                continue
            if not 0 <= index < len(replicas[site]) or replicas[site][index].url != record.get("url"):
                continue
            replica = replicas[site][index]
            if isinstance(failing := record.get("failing"), str):
                # repaired (reset, probed) before its next lease; also when it was being reset or out of
                # service then, which a failing copy is until its probe finds it up
                replica.failing = failing
            if replica.failing or any(record.get(key) for key in ("dirty", "resetting", "out_of_service")):
                found.append(replica)
    return found


def restored_counters(document: dict[str, Any], counters: dict[str, SiteCounters]) -> None:
    """Add the counters `document` kept to `counters`, so the run report counts across restarts."""
    for name, kept in (document.get("sites") or {}).items():
        site = site_key(str(name))
        if site not in counters or not isinstance(kept, dict):
            continue
        mine = counters[site]
        for field, key in (("resets", "resets"), ("skipped", "resets_skipped"), ("failed", "resets_failed")):
            if isinstance(value := kept.get(key), int):
                setattr(mine, field, getattr(mine, field) + value)
        if isinstance(seconds := kept.get("reset_seconds"), int | float):
            mine.seconds += float(seconds)


def document_of(
    policy: str, counters: dict[str, Any], replicas: dict[str, list[ReplicaState]]
) -> dict[str, Any]:
    return {
        "isolation": policy,  # the sharing policy, under its flag's name
        "sites": counters,
        "replicas": {
            placeholder(name): [replica_record(r) for r in rs] for name, rs in sorted(replicas.items())
        },
    }


def restore(
    path: Path, replicas: dict[str, list[ReplicaState]], counters: dict[str, SiteCounters], *, reset_all: bool
) -> list[ReplicaState]:
    """What `path` remembers, into a new pool's `replicas` and `counters`: each replica it names changed
    (every one with `reset_all`) is marked changed and, when it has a reset endpoint, resetting (no lease
    until its reset is done). The replicas marked."""
    document = read_document(path)
    restored_counters(document, counters)
    remembered = needing_reset(document, replicas)  # and each one remembered failing is failing again
    chosen = [r for rs in replicas.values() for r in rs] if reset_all else remembered
    why = "--reset-at-start" if reset_all else "changed before a restart"
    for replica in chosen:
        replica.dirty = True
        if replica.way is None:
            logger.warning(
                "replica %d of %s (%s): %s, and it cannot be reset (no reset_url): leased as it is",
                replica.index, placeholder(replica.site), replica.url, why,
            )  # fmt: skip
        else:
            replica.resetting = True
    return chosen
