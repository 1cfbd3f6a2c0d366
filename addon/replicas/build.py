"""One way to build the pool, for the single process (`control/authority.py`) and a fleet's front
(`fleet/service.py`) alike: the same checks, the same counters file."""

from __future__ import annotations

from pathlib import Path

from webarena_live.evaluator import POOL_FILE, SiteMap
from webarena_live.replicas.errors import PoolSetupError
from webarena_live.replicas.lease_book import BOOK_DIR, LeaseBook
from webarena_live.replicas.memory import state_dir
from webarena_live.replicas.policy import Isolation, default_isolation, isolation_problems
from webarena_live.replicas.pool import ReplicaPool
from webarena_live.replicas.reset import keeps_data_problems
from webarena_live.replicas.resetting import CopyKeeper


def build_pool(
    site_map: SiteMap,
    isolation: Isolation | None,
    lease_timeout: float | None,
    *,
    state_file: Path | None = None,
    reset_at_start: bool = False,
    current: ReplicaPool | None = None,
    keeper: CopyKeeper | None = None,
) -> ReplicaPool:
    """The replicas of `site_map` under the sharing policy (None: the map decides), leases ending after
    `lease_timeout` idle seconds (None: with their session). `state_file` (`OUT/.pool.json`): where it
    remembers its replicas' state (its lease book beside it); a new pool reads both and resets every
    replica it names changed (all of them with `reset_at_start`) before leasing it, once the loop runs
    (`ReplicaPool.start`). `current`, the pool in use, is kept when the map and the policy did not
    change (a reconfiguration keeps its leases). `PoolSetupError`, one problem a line, when the policy
    cannot hold on this map, or when a `reset_url` is an endpoint that keeps the data
    (`keeps_data_problems`). `keeper`: the container copies' (`webarena_live.sites`), whose ways make
    them new; a map of copies is shared by readers unless told otherwise (each copy can be made new)."""
    wanted = isolation or (Isolation.READERS if keeper is not None else default_isolation(site_map))
    if current is not None and current.site_map == site_map and current.isolation is wanted:
        current.lease_timeout = lease_timeout
        pool = current
    else:
        ways = keeper.ways if keeper is not None else {}
        problems = isolation_problems(site_map, wanted, resettable=set(ways)) + keeps_data_problems(site_map)
        problems += keeper.problems() if keeper is not None else []
        if problems:
            raise PoolSetupError("\n".join(problems))
        pool = ReplicaPool(
            site_map, wanted, lease_timeout=lease_timeout, ways=ways,
            ceilings=keeper.ceilings if keeper is not None else None, keeper=keeper,
        )  # fmt: skip
        pool.state_file = state_file
        if state_file is not None:  # the lease book beside it: `OUT/.leases/`
            pool.book = LeaseBook(state_file.parent / BOOK_DIR)
        pool.restore(reset_all=reset_at_start)
    return pool


def banner_line(pool: ReplicaPool, *, confine: bool) -> str:
    """What `serve`'s banner says of the pool: its policy, `--confine`, the lease timeout, its memory."""
    copies = sum(len(replicas) for replicas in pool.replicas.values())
    if pool.keeper is not None:
        return (
            f"  replicas      {copies} of {len(pool.replicas)} sites ({pool.keeper.describe()}), "
            f"--isolation {pool.isolation}, --confine {'on' if confine else 'off'}, --lease-timeout "
            f"{f'{pool.lease_timeout:g} s idle' if pool.lease_timeout is not None else 'never'}"
            + (f"; remembered in {pool.state_file}" if pool.state_file is not None else "")
        )
    timeout = f"{pool.lease_timeout:g} s idle" if pool.lease_timeout is not None else "never"
    kept = f"; remembered in {pool.state_file}" if pool.state_file is not None else ""
    return (
        f"  replicas      {copies} of {len(pool.replicas)} sites, --isolation {pool.isolation}, "
        f"--confine {'on' if confine else 'off'}, --lease-timeout {timeout}{kept}"
    )


def pool_file(output_dir: Path | None, journal_dir: Path | None = None) -> Path:
    """Where a pool remembers its replicas: `OUT/.pool.json`, else beside the journals, else in the
    per-user state directory."""
    if output_dir is not None:
        return output_dir / POOL_FILE
    return (journal_dir or state_dir()) / POOL_FILE
