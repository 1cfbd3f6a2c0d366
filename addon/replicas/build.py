"""One way to build the pool, for the single process (`proxy/leases.py`) and a fleet's front
(`fleet/service.py`) alike: the same checks, the same counters file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from webarena_live.evaluator import POOL_FILE, SiteMap
from webarena_live.replicas.errors import PoolSetupError
from webarena_live.replicas.policy import Isolation, default_isolation, isolation_problems
from webarena_live.replicas.pool import ReplicaPool


def build_pool(
    site_map: SiteMap,
    isolation: Isolation | None,
    lease_timeout: float | None,
    *,
    output_dir: Path | None = None,
    current: ReplicaPool | None = None,
    on_change: Callable[[str, dict[str, Any]], None] | None = None,
) -> ReplicaPool:
    """The replicas of `site_map` under `isolation` (None: the map decides), leases ending after
    `lease_timeout` seconds (None: with their session). `current`, the pool in use, is kept when the map
    and the policy did not change (a reconfiguration keeps its leases). `PoolSetupError`, one problem a
    line, when the policy cannot hold on this map."""
    wanted = isolation or default_isolation(site_map)
    if current is not None and current.site_map == site_map and current.isolation is wanted:
        current.lease_timeout = lease_timeout
        pool = current
    else:
        if problems := isolation_problems(site_map, wanted):
            raise PoolSetupError("\n".join(problems))
        pool = ReplicaPool(site_map, wanted, lease_timeout=lease_timeout, on_change=on_change)
    if output_dir is not None:
        pool.counters_file = output_dir / POOL_FILE
    return pool
