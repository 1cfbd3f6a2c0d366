"""A lease's records, typed once: the lease as it is kept and told (`LeaseRecord`), its end (`LeaseEnd`)
and a session's interference (`Interference`). The lease book writes and reads the record
(`replicas/lease_book.py`); a fleet's wire carries the grant, the end and the interference
(`control/wire.py`); a finish, a preview and the session views show the interference's JSON
(`Interference.view`). How a lease lives and ends: docs/architecture.md, Leases.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeInt,
    StrictBool,
    StrictInt,
    StrictStr,
    model_validator,
)

from webarena_live.replicas.lease import EndReason, Lease
from webarena_live.replicas.state import Mutation

_END_FIELDS = frozenset({"ended", "reason", "ended_at"})
_GRANT_FIELDS = frozenset({"indexes", *_END_FIELDS})


class LeaseEnd(BaseModel):
    """A lease's end: why, the reason given with it (an abandon's), when. Also the body of
    `PUT /sessions/{s}/lease_ended`, a fleet's front telling a worker the lease it gave ended."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ended: EndReason
    """One of the lease's ends (`EndReason`): a word the pool does not know is refused, not stored."""
    reason: StrictStr | None = None
    ended_at: float | None = None

    @classmethod
    def of(cls, lease: Lease) -> LeaseEnd:
        """The end of `lease`, which has ended."""
        if lease.ended is None:
            raise ValueError(f"session {lease.session!r}'s lease has not ended")
        return cls(ended=lease.ended, reason=lease.ended_detail, ended_at=lease.ended_at)


class LeaseRecord(BaseModel):
    """A lease as it is kept and told. The lease book keeps every field (`book_document`); a fleet's
    front tells its worker the grant on a start (`grant_json`): the replica indexes and the end, the
    worker's own site map giving the URLs. The end's reason is `ended_reason` in the book and `reason`
    on the wire, as they always were; either name is read."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # the book's order of keys, so that a record is written as the last release wrote it
    session: StrictStr = ""
    task_id: StrictInt | None = None
    mutating: StrictBool = False
    indexes: dict[StrictStr, StrictInt]
    replicas: dict[StrictStr, StrictStr] = {}
    started: float | None = None
    """None on the wire: the worker's view starts with its own start."""
    ended: EndReason | None = None
    reason: StrictStr | None = Field(
        default=None,
        validation_alias=AliasChoices("ended_reason", "reason"),
        serialization_alias="ended_reason",
    )
    ended_at: float | None = None

    @classmethod
    def of(cls, lease: Lease) -> LeaseRecord:
        return cls(
            session=lease.session, task_id=lease.task_id, mutating=lease.mutating, indexes=lease.indexes,
            replicas=lease.replicas, started=lease.started, ended=lease.ended, reason=lease.ended_detail,
            ended_at=lease.ended_at,
        )  # fmt: skip

    @property
    def end(self) -> LeaseEnd | None:
        if self.ended is None:
            return None
        return LeaseEnd(ended=self.ended, reason=self.reason, ended_at=self.ended_at)

    def lease(self) -> Lease:
        """The lease this records, ended as it ended; its idle time counts from its start."""
        lease = Lease(
            dict(self.indexes), dict(self.replicas), session=self.session, task_id=self.task_id,
            mutating=self.mutating,
        )  # fmt: skip
        if self.started is not None:
            lease.started = lease.touched = self.started
        if self.ended is not None:
            lease.copy_end(self.ended, self.reason, self.ended_at)
        return lease

    def book_document(self) -> dict[str, Any]:
        """The lease book's file: every field, the end's (`ended`, `ended_reason`, `ended_at`) once it
        ended."""
        held = self.ended is None
        return self.model_dump(mode="json", by_alias=True, exclude=set(_END_FIELDS) if held else None)

    def grant_json(self) -> str:
        """The grant a front tells its worker (`LEASE_HEADER`): the indexes, and the end when there is
        one (`ended`, `reason`, `ended_at`)."""
        return self.model_dump_json(include=set(_GRANT_FIELDS), exclude_none=True)


class OtherMutation(BaseModel):
    """A mutation another session made on one of the session's replicas, as an interference lists it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    session: StrictStr
    method: StrictStr
    url: StrictStr
    time: float | None = None
    """When the pool saw it; a front's word may leave it out, and the view then has no `time`."""


class Interference(BaseModel):
    """A session's interference, as its finish and preview report it and a fleet's front carries it:
    whether other sessions changed its replicas while it held them (`exposed`), how many changes
    (`count`, all of them), the first ones (`mutations`: every one, or as many as `listed` keeps), the
    replicas, and on a fleet the workers whose mutations are not known (`unanswered_workers`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    exposed: StrictBool
    count: NonNegativeInt
    mutations: tuple[OtherMutation, ...] = ()
    replicas: dict[StrictStr, StrictStr] = {}
    unanswered_workers: tuple[StrictInt, ...] | None = None

    @model_validator(mode="after")
    def _counted(self) -> Interference:
        if self.count < len(self.mutations):
            raise ValueError(f"count {self.count} is fewer than the {len(self.mutations)} mutations listed")
        if self.exposed != (self.count > 0):
            raise ValueError(f"exposed is {self.exposed} with {self.count} mutations by other sessions")
        return self

    @classmethod
    def none(cls, replicas: Mapping[str, str] | None = None) -> Interference:
        """The interference of a session nobody interfered with."""
        return cls(exposed=False, count=0, replicas=dict(replicas or {}))

    @classmethod
    def of(cls, mutations: Sequence[Mutation], replicas: Mapping[str, str]) -> Interference:
        """Other sessions' `mutations` on the `replicas` held, every one listed."""
        listed = tuple(
            OtherMutation(session=m.session, method=m.method, url=m.url, time=m.time) for m in mutations
        )
        return cls(exposed=bool(listed), count=len(listed), mutations=listed, replicas=dict(replicas))

    def listed(self, limit: int) -> Interference:
        """At most `limit` mutations listed (the first ones); `count` still counts all of them."""
        return self.model_copy(update={"mutations": self.mutations[:limit]})

    def unanswered(self, workers: Sequence[int]) -> Interference:
        """The same, with the workers that did not tell their mutations (none: as it is)."""
        return self.model_copy(update={"unanswered_workers": tuple(sorted(workers))}) if workers else self

    def view(self) -> dict[str, Any]:
        """The JSON a verdict, a session's view and a finish's answer hold."""
        return self.model_dump(mode="json", exclude_none=True)


def no_interference(replicas: dict[str, str] | None = None) -> dict[str, Any]:
    """`Interference.none`'s JSON view (the one shape: `count` always there)."""
    return Interference.none(replicas).view()
