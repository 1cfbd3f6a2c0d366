"""The pool as `/health`, the dashboard and its state file show it: per site, its replicas' states and
the reset counters (`ReplicaPool.status`, `ReplicaPool.counters_view`)."""

from __future__ import annotations

import time
from typing import Any

from webarena_live.evaluator import placeholder
from webarena_live.replicas.policy import Isolation
from webarena_live.replicas.state import ReplicaState, SiteCounters


def pool_status(
    replicas: dict[str, list[ReplicaState]],
    counters: dict[str, SiteCounters],
    policy: str,
    waiting: int,
    leases: int,
    refused: list[dict[str, Any]],
) -> dict[str, Any]:
    """Per site its replicas, how many are leased, free, resetting or out of service, and the reset
    counters; the sharing policy (`isolation`), how many starts wait and which were refused."""
    sites = {}
    for name, site_replicas in sorted(replicas.items()):
        views = [r.view() for r in site_replicas]
        states = [v["state"] for v in views]
        site_counters = counters[name]
        sites[placeholder(name)] = {
            "replicas": views,
            "leased": states.count("leased"),
            "free": states.count("free"),
            "resetting": states.count("resetting"),
            "out_of_service": states.count("out_of_service"),
            "failing": states.count("failing"),
            "dirty": states.count("dirty"),
            "resets": site_counters.resets,
            "resets_skipped": site_counters.skipped,
            "resets_failed": site_counters.failed,
            "reset_seconds": round(site_counters.seconds, 3),
            "reads_by_rule": {},  # POSTs and the like a rule judged reads (`changes`): no reset
        }
    return {"isolation": policy, "waiting": waiting, "leases": leases, "sites": sites, "refused": refused}


def counters_view(counters: dict[str, SiteCounters]) -> dict[str, Any]:
    """Per site: resets done, skipped (released clean), failed, and seconds spent resetting."""
    return {
        placeholder(name): {"resets": c.resets, "resets_skipped": c.skipped, "resets_failed": c.failed,
                            "reset_seconds": round(c.seconds, 3)}
        for name, c in sorted(counters.items())
    }  # fmt: skip


def busy_detail(
    replicas: dict[str, list[ReplicaState]],
    isolation: Isolation,
    sites: tuple[str, ...],
    mutating: bool,
    ceilings: dict[str, int] | None = None,
) -> str:
    """Why no replica fits a start: each site's replicas in words (`ReplicaState.in_words`), the copies
    in use against the site's `replicas` when the rest are spares, and the shortest reset in flight."""
    kind = "a mutating task" if mutating else "a read-only task"
    busy = []
    for site in sites:
        words = ", ".join(r.in_words() for r in replicas[site])
        ceiling = (ceilings or {}).get(site)
        if ceiling is not None:
            held = sum(1 for r in replicas[site] if r.holders)
            spares = len(replicas[site]) - ceiling
            words = (
                f"{held} of {ceiling} copies in use{', the others spares' if spares > 0 else ''}; " + words
            )
        busy.append(f"{placeholder(site)}: {words}")
    detail = f"no replica is free for {kind} under --isolation {isolation} ({'; '.join(busy)})"
    # every reset begun counts, its task running or not yet (a start that gave up its own changed
    # replica began one a moment ago: it is what the wait is for)
    resetting = [r for site in sites for r in replicas[site] if r.resetting]
    if resetting:
        now = time.time()
        oldest = now - min(r.reset_started if r.reset_started is not None else now for r in resetting)
        took = [r.resets[-1]["seconds"] for r in resetting if r.resets and r.resets[-1].get("ok")]
        last = f", and the last finished one took {took[-1]:.0f} s" if took else ""
        detail += (
            f"; {len(resetting)} reset{'s' if len(resetting) > 1 else ''} in flight: the wait is the first "
            f"to finish (the oldest has run {oldest:.0f} s{last})"
        )
    return detail
