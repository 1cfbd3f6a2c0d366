"""Who may share a replica of a site (`--isolation`), and how long a lease may be held (`--lease-timeout`):
the policy the replica pool (`replicas/pool.py`) applies, read and checked before anything runs.
"""

from __future__ import annotations

from collections.abc import Collection
from enum import StrEnum

from webarena_live.evaluator import SiteMap, Task, WebArenaLiveError, placeholder


class Isolation(StrEnum):
    NONE = "none"
    READERS = "readers"
    EXCLUSIVE = "exclusive"


def default_isolation(site_map: SiteMap) -> Isolation:
    """`readers` when some site has two or more replicas, else `none`: one copy per site behaves as before."""
    return Isolation.READERS if site_map.replicated else Isolation.NONE


def parse_isolation(text: str) -> Isolation | None:
    """`--isolation`'s value; None when not given (the site map then decides)."""
    if not text.strip():
        return None
    try:
        return Isolation(text.strip().lower())
    except ValueError:
        raise WebArenaLiveError(f"--isolation {text!r}: choose none, readers or exclusive") from None


def parse_lease_timeout(text: str) -> float | None:
    """`--lease-timeout`'s seconds; None when not given (leases end with their session)."""
    if not text.strip():
        return None
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds < float("inf"):
        raise WebArenaLiveError(f"--lease-timeout {text!r}: a number of seconds above 0")
    return seconds


def isolation_problems(
    site_map: SiteMap, isolation: Isolation, resettable: Collection[tuple[str, int]] = ()
) -> list[str]:
    """What makes `isolation` impossible on `site_map`: under `readers` and `exclusive` a changed replica
    must be reset before its next lease, so every replica needs a reset endpoint, or another way to be
    made new (`resettable`: (site, index) of the container copies)."""
    if isolation is Isolation.NONE:
        return []
    return [
        f"--isolation {isolation}: {placeholder(name)} replica {index} ({replica.url}) has no reset_url "
        "(a changed replica is reset before its next lease); add one, or use --isolation none"
        for name, env in sorted(site_map.environments.items())
        for index, replica in enumerate(env.replicas)
        if not replica.reset_url and (name, index) not in resettable
    ]


def is_mutating(task: Task) -> bool:
    """Whether the task changes its sites: anything but a retrieve or navigate task."""
    return task.task_type.value not in ("RETRIEVE", "NAVIGATE")
