"""The wire between a fleet's front and its workers, typed in one place (docs/architecture.md, Workers).

The front owns every lease (its pool, `replicas/pool.py`); a worker holds a view of the one it was told.
What the front tells a worker: the lease it granted, as it is (held, or ended with its reason), on the
start it forwards (`LEASE_HEADER`: `encode_lease`, read back by `lease_view`); a lease's end
(`PUT /sessions/{s}/lease_ended`: `LeaseEnd`); a session's interference on the finish or preview it
forwards (`INTERFERENCE_HEADER`: `encode_interference`, `decode_interference`). What a worker tells the
front: `GET /mutations` (`Mutations`, validated by the front as the worker's route declares it).
"""

from __future__ import annotations

import base64
import binascii
import json
import zlib
from typing import Any

from pydantic import BaseModel, ConfigDict, StrictBool, StrictInt, StrictStr, ValidationError

from webarena_live.control.bodies import ControlError
from webarena_live.control.models import Mutations
from webarena_live.evaluator import SiteMap, site_key
from webarena_live.replicas import EndReason, Lease, lease_of

__all__ = [
    "Interference",
    "LeaseEnd",
    "LeaseGrant",
    "Mutations",
    "decode_interference",
    "encode_interference",
    "encode_lease",
    "lease_view",
]


class LeaseGrant(BaseModel):
    """A lease as the front tells it on a start (`LEASE_HEADER`): its replicas and, for a session resumed
    after its lease ended, the end (the worker's proxy then forwards nothing for it)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    indexes: dict[StrictStr, StrictInt]
    ended: EndReason | None = None
    reason: StrictStr | None = None
    ended_at: float | None = None


class LeaseEnd(BaseModel):
    """Body of `PUT /sessions/{s}/lease_ended`: the front telling a worker the lease it gave ended."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ended: EndReason
    """One of the lease's ends (`EndReason`): a word the pool does not know is refused, not stored."""
    reason: StrictStr | None = None
    ended_at: float | None = None

    @classmethod
    def of(cls, lease: Lease) -> LeaseEnd:
        assert lease.ended is not None
        return cls(ended=lease.ended, reason=lease.ended_detail, ended_at=lease.ended_at)


class Interference(BaseModel):
    """A session's interference as the front carries it (`INTERFERENCE_HEADER`): its pool's word, with
    `unanswered_workers` when some workers did not tell their mutations."""

    model_config = ConfigDict(extra="allow")

    exposed: StrictBool
    count: int = 0
    mutations: list[dict[str, Any]] = []
    replicas: dict[str, str] = {}


def encode_lease(lease: Lease) -> str:
    grant = LeaseGrant(indexes=lease.indexes, ended=lease.ended, reason=lease.ended_detail,
                       ended_at=lease.ended_at)  # fmt: skip
    return grant.model_dump_json(exclude_none=True)


def lease_view(header: str, site_map: SiteMap, session: str) -> Lease:
    """The worker's view of the lease its front told (`encode_lease`); a 400 when the header holds
    none, or names a replica this worker's site map does not have."""
    try:
        grant = LeaseGrant.model_validate_json(header)
        view = lease_of(site_map, {site_key(k): v for k, v in grant.indexes.items()}, session)
    except (ValidationError, ValueError):
        raise ControlError(400, "bad_lease", f"the front's lease {header!r} names no replica here") from None
    if grant.ended is not None:
        view.copy_end(grant.ended, grant.reason, grant.ended_at)
    return view


def encode_interference(interference: dict[str, Any]) -> str:
    """A header value for `interference`: its JSON, compressed (a hundred listed URLs repeat much) and
    in URL-safe base64 (a header holds latin-1 only; a URL may not be)."""
    document = Interference.model_validate(interference).model_dump()
    packed = zlib.compress(json.dumps(document, separators=(",", ":")).encode(), 6)
    return base64.urlsafe_b64encode(packed).decode("ascii")


def decode_interference(header: str) -> dict[str, Any]:
    """The interference `encode_interference` wrote; a 400 when the header holds none."""
    try:
        document = json.loads(zlib.decompress(base64.urlsafe_b64decode(header.encode("ascii"))))
        return Interference.model_validate(document).model_dump()
    except (ValueError, binascii.Error, zlib.error, ValidationError):
        raise ControlError(400, "bad_interference", "the front's interference header holds none") from None
