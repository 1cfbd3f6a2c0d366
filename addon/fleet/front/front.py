"""The front of `serve --workers N`: the workers as the control API sees them, in parts with one job each.

`Front` holds them, built in order once the workers exist (nothing replaced later): where each session
lives (`addresses/placement.py`), the way to the workers (`link.py`: forwarding, deadlines, refusals,
credentials), what the front knows of each session (`registry.py`), their starts, finishes, abandons
and losses (`life.py`), what it does when a worker dies, returns or leaves (`recovery.py`) and
the replica pool's leases (`leases.py`). The routes are in
`fleet/front/app.py` (docs/architecture.md, Workers).
"""

from __future__ import annotations

from webarena_live.addresses.placement import Placement
from webarena_live.fleet.front.leases import FrontLeases
from webarena_live.fleet.front.life import SessionLife
from webarena_live.fleet.front.link import WorkerLink
from webarena_live.fleet.front.recovery import Recovery
from webarena_live.fleet.front.registry import SessionRegistry
from webarena_live.fleet.workers.local import Worker, Workers


class Front:
    """The fleet as the control API sees it: the workers, where each session lives, what each runs."""

    def __init__(
        self,
        workers: Workers,
        placement: Placement,
        link: WorkerLink,
        registry: SessionRegistry,
        leases: FrontLeases,
        listening: dict[str, int | None] | None = None,
    ) -> None:
        self.workers = workers
        self.placement = placement
        self.link = link
        self.registry = registry
        """What the front knows of each session (`registry.py`)."""
        self.leases = leases
        """The replica pool (`leases.py`): the front leases every session's replicas."""
        self.life = SessionLife(self)
        """Start, finish, abandon and loss of a session, each in one place (`life.py`)."""
        self.recovery = Recovery(workers, placement, registry, link, leases, lose=self.life.lost)
        leases.attach(link, self.owner_worker)  # a lease's end is told to its session's worker
        self.listening = listening if listening is not None else {}
        """The front's own ports for `/health` (`proxy_port`, `session_port`, `control_port`)."""
        self.ready = False
        """Every worker answered once (until then `/health` answers 503)."""
        self.faults_file: str | None = None
        """`--faults FILE` (absolute): where the workers' plan came from, for `/health` (a Ray worker
        names the copy it reads)."""

    def workers_near(self, near: str) -> list[int]:
        """The workers on the node an agent asked to be `near` (its Ray node id or its address); with
        local workers, all: they share the agent's machine."""
        if all(worker.node is None for worker in self.workers):
            return [worker.index for worker in self.workers]
        down = self.placement.down
        return [w.index for w in self.workers if near in (w.node, w.host) and w.index not in down]

    def owner_worker(self, name: str) -> Worker | None:
        """The worker that holds session `name`, None when none does."""
        owner = self.placement.owner(name)
        return self.workers[owner] if owner is not None else None

    def up_workers(self) -> list[Worker]:
        """The workers that are up and answer."""
        return self.link.up_workers()

    def state_of(self, worker: Worker) -> str:
        """`up`, `restarting`, `unresponsive` (alive, not answering) or `lost` (its node left)."""
        if worker.node_lost:
            return "lost"
        if not worker.up or worker.index in self.placement.down:
            return "restarting"
        return "up" if worker.responsive else "unresponsive"
