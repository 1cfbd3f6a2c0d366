"""A copy's health, from the answers it already gives: whether a replica's recent answers are mostly
failures, and how long to wait before probing a failing one again.

Pure: no IO, no clock, no asyncio. The pool tells each replica's `ReplicaHealth` every judged answer
(a navigation or a mutation to the task's sites) and reads `failing`; what it then does (no new lease,
a reset, probes of `Replica.probe_url` with the pauses of `probe_pause`) is the pool's.

A failure is an answer that shows the site failing rather than the agent (`answer_failed`): no
connection or a timeout (status 0 with an error), 500 (a broken application answers it to everything)
and 502-504. Anything else, a 404 or a 403 included, is the site answering.

The contract with the caller: **faults the proxy injected on purpose (`serve --faults`) are never
reported here.** They say nothing about the copy; counting them would take healthy copies out of
service. The proxy's fault hook marks the flows it faulted, and whoever reports answers skips those.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from webarena_live.evaluator import SiteHealth, answer_failed

PROBE_PAUSE = (2.0, 60.0)
"""Seconds before the first probe of a failing replica, and the most any later pause grows to."""


class ReplicaHealth:
    """One replica's recent judged answers (a window of `settings.window`), and whether they show it
    failing: at least `min_answers` of them, and a share of `threshold` or more failures, or the last
    `min_answers` of them all failures."""

    def __init__(self, settings: SiteHealth | None = None) -> None:
        self.settings = settings or SiteHealth()
        self._recent: deque[bool] = deque(maxlen=self.settings.window)
        self.answers = 0
        """Every answer ever told, across resets of the window (for `/health`)."""
        self.failures = 0
        """Every failure ever told, across resets of the window."""

    def record(self, status: object, error: object = None) -> bool:
        """Tell one judged answer (its status, and the error when it got none); whether the replica is
        failing now."""
        return self.record_outcome(failed=answer_failed(status, error))

    def record_outcome(self, *, failed: bool) -> bool:
        """Tell one judged answer already classified; whether the replica is failing now."""
        self._recent.append(failed)
        self.answers += 1
        self.failures += failed
        return self.failing

    @property
    def recent_failures(self) -> int:
        return sum(self._recent)

    @property
    def failing(self) -> bool:
        """Whether the recent answers are mostly failures: enough of them (`min_answers`), and a share
        of failures at or above `threshold`; or the last `min_answers` answers all failures (a copy that
        breaks after many good answers is noticed at once, not once its failures outnumber them)."""
        recent = len(self._recent)
        minimum = self.settings.min_answers
        if recent < minimum:
            return False
        if all(self._recent[i] for i in range(recent - minimum, recent)):
            return True
        return self.recent_failures >= self.settings.threshold * recent

    def clear(self) -> None:
        """Forget the recent answers: a reset copy that its probe found up starts afresh (its earlier
        failures would otherwise call it failing again at its first answer)."""
        self._recent.clear()

    def view(self) -> dict[str, Any]:
        """What `/health` shows of it."""
        return {
            "failing": self.failing,
            "recent_answers": len(self._recent),
            "recent_failures": self.recent_failures,
            "answers": self.answers,
            "failures": self.failures,
        }


def probe_pause(attempt: int, *, first: float = PROBE_PAUSE[0], cap: float = PROBE_PAUSE[1]) -> float:
    """Seconds to wait before probe number `attempt` (0 the first) of a replica still failing: doubling
    from `first`, never above `cap`, so a copy that stays down costs few probes and one that comes back
    is found within `cap`."""
    if attempt < 0:
        raise ValueError(f"attempt must be 0 or more, got {attempt}")
    if first <= 0 or cap < first:
        raise ValueError(f"need 0 < first <= cap, got first={first}, cap={cap}")
    # The exponent is bounded so a long outage cannot overflow the float.
    return min(cap, first * 2.0 ** min(attempt, 64))
