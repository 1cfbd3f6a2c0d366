"""How a replica is made new (`ResetWay`) and what one reset did (`ResetOutcome`): the seam between the
pool and whatever resets a copy (an endpoint: `reset.py`; a new container: `webarena_live.sites`; a
checkpoint's restore), free of any HTTP client, so the pool's records can name it."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class ResetOutcome:
    """What one site's reset endpoint answered."""

    site: str
    url: str | None
    ok: bool
    seconds: float
    detail: str
    status: int | None = None

    def view(self) -> dict[str, Any]:
        """As a reply lists it: every field, `status` included (None when nothing answered)."""
        return asdict(self)


class ResetWay(Protocol):
    """How one replica is made new: an endpoint (`EndpointReset`), a new container from the image
    (`webarena_live.sites`), a restore of a checkpoint. The pool calls `reset` once the replica's last
    holder left and it changed, `bring_up` once when it starts (a copy that must be made or adopted
    first), `changed` when it takes its first change since a reset."""

    @property
    def kind(self) -> str:
        """What a reset of it does, in a word (`endpoint`, `recreate`): shown in `/health`."""
        ...

    async def reset(self, timeout: float) -> ResetOutcome: ...

    async def bring_up(self) -> ResetOutcome | None:
        """Make the replica ready to lease at start; None when there is nothing to do."""
        ...

    def changed(self) -> None: ...
