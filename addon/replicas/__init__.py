"""The replica pool: which copy of each site a session works on, who may share it, when it is reset, and
what other sessions changed under it (docs/architecture.md, Replicas).

Below `control`, `proxy` and `fleet`, which keep thin adapters; it depends on the evaluator, httpx,
pydantic (the typed records, `replicas/records.py`) and the standard library only. `runs` imports its
lease record (`Lease`), which the attempt and the pool share, and the interference (`Interference`).
The package's own names are the records (lease, its serialised record and end, interference, mutation
log, policy, errors), free of any HTTP client; the pool itself, its builder and its resets are imported
from their modules (`replicas.pool`, `replicas.build`, `replicas.reset`), so that `runs` loads none of
them.

Owns: the pool, its leases and resets, the mutation log, and `changes` (what a request does to a site:
a read or a change, and by which rule).
May import: the evaluator's public names, httpx, pydantic and the standard library; `changes` graphql-core and
the evaluator's names only (an import contract).
"""

from webarena_live.replicas.errors import RETRY_AFTER, NoReplica, PoolError, PoolSetupError, ResetFailed
from webarena_live.replicas.lease import FORGOTTEN, EndReason, Lease, LeaseUse, lease_of, replica_urls
from webarena_live.replicas.mutations import MutationLog
from webarena_live.replicas.policy import (
    Isolation,
    default_isolation,
    is_mutating,
    isolation_problems,
    parse_isolation,
    parse_lease_timeout,
)
from webarena_live.replicas.records import Interference, LeaseEnd, LeaseRecord, no_interference
from webarena_live.replicas.state import Mutation, ReplicaState, SiteCounters

__all__ = [
    "FORGOTTEN",
    "RETRY_AFTER",
    "EndReason",
    "Interference",
    "Isolation",
    "Lease",
    "LeaseEnd",
    "LeaseRecord",
    "LeaseUse",
    "Mutation",
    "MutationLog",
    "NoReplica",
    "PoolError",
    "PoolSetupError",
    "ReplicaState",
    "ResetFailed",
    "SiteCounters",
    "default_isolation",
    "is_mutating",
    "isolation_problems",
    "lease_of",
    "no_interference",
    "parse_isolation",
    "parse_lease_timeout",
    "replica_urls",
]
