"""The wire between a fleet's front and its workers, typed in one place (docs/architecture.md, Workers).

The front owns every lease (its pool, `replicas/pool.py`); a worker holds a view of the one it was told.
What the front tells a worker: the lease it granted, as it is (held, or ended with its reason), on the
start it forwards (`LEASE_HEADER`: `encode_lease`, read back by `lease_view`); a lease's end
(`PUT /sessions/{s}/lease_ended`: `LeaseEnd`); a session's interference on the finish or preview it
forwards (`INTERFERENCE_HEADER`: `encode_interference`, `decode_interference`). What a worker tells the
front: `GET /mutations` (`Mutations`, validated by the front as the worker's route declares it). The
lease's records are the replica pool's own (`replicas/records.py`: `LeaseRecord`, `LeaseEnd`,
`Interference`), the same on disk and here.
"""

from __future__ import annotations

import base64
import binascii
import json
import zlib
from typing import Any

from pydantic import ValidationError

from webarena_live.control.bodies import ControlError
from webarena_live.control.errors import validation_detail
from webarena_live.control.models import Mutations
from webarena_live.evaluator import SiteMap, site_key
from webarena_live.replicas import Interference, Lease, LeaseEnd, LeaseRecord, lease_of

__all__ = [
    "Interference",
    "LeaseEnd",
    "LeaseRecord",
    "Mutations",
    "decode_interference",
    "encode_interference",
    "encode_lease",
    "lease_view",
    "read_interference",
]


def encode_lease(lease: Lease) -> str:
    """The grant a front tells its worker: the lease's record, its indexes and end (`LeaseRecord`)."""
    return LeaseRecord.of(lease).grant_json()


def lease_view(header: str, site_map: SiteMap, session: str) -> Lease:
    """The worker's view of the lease its front told (`encode_lease`); a 400 when the header holds no
    lease record (saying what is wrong), or names a replica this worker's site map does not have."""
    try:
        grant = LeaseRecord.model_validate_json(header)
    except ValidationError as error:
        problems = "; ".join(validation_detail(error.errors()))
        raise ControlError(
            400, "bad_lease", f"the front's lease {header!r} is no lease ({problems})"
        ) from None
    try:
        view = lease_of(site_map, {site_key(k): v for k, v in grant.indexes.items()}, session)
    except ValueError:
        raise ControlError(400, "bad_lease", f"the front's lease {header!r} names no replica here") from None
    if (end := grant.end) is not None:
        view.copy_end(end.ended, end.reason, end.ended_at)
    return view


def encode_interference(interference: Interference | dict[str, Any]) -> str:
    """A header value for `interference` (the model, or its JSON view): its JSON, compressed (a hundred
    listed URLs repeat much) and in URL-safe base64 (a header holds latin-1 only; a URL may not be)."""
    document = Interference.model_validate(interference).view()
    packed = zlib.compress(json.dumps(document, separators=(",", ":")).encode(), 6)
    return base64.urlsafe_b64encode(packed).decode("ascii")


def read_interference(header: str) -> Interference:
    """The interference `encode_interference` wrote; a 400 when the header holds none."""
    try:
        document = json.loads(zlib.decompress(base64.urlsafe_b64decode(header.encode("ascii"))))
        return Interference.model_validate(document)
    except (ValueError, binascii.Error, zlib.error):  # pydantic's refusal is a ValueError
        raise ControlError(400, "bad_interference", "the front's interference header holds none") from None


def decode_interference(header: str) -> dict[str, Any]:
    """`read_interference`'s JSON view, as a finish reports it."""
    return read_interference(header).view()
