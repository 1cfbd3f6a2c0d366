"""The mutation log: every request through a proxy that may have changed a replica, in order.

Whoever sees the traffic keeps one: the single process and each worker of `serve --workers`. It only
records; the pool (`replicas/pool.py`) that leases reads from it: in one process the log hands each
mutation to its pool as it is recorded (`listen`), and a fleet's front reads every worker's log over
HTTP (`GET /mutations`, `mutations_after`) and hands what it gathers to its own pool (`ReplicaPool.take`).
`record` is the one place where a request is judged a change of a replica or a read (`changes`: a GraphQL
query, signing in, a site map's own rules); reads are counted by rule (`reads`, in `/health`), never
logged. It also keeps the judged answers each replica gave (`answered`: a navigation's or a mutation's
status), which the pool reads as the copy's health, the same two ways. See docs/architecture.md, Replicas.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections import Counter, deque
from collections.abc import Callable
from itertools import islice
from typing import Any

from webarena_live.evaluator import MUTATION_METHODS, SiteMap, answer_failed, placeholder
from webarena_live.replicas.changes import CHANGE_UNJUDGED, ChangeRules
from webarena_live.replicas.state import MUTATIONS_KEPT, Mutation

logger = logging.getLogger(__name__)


MutationListener = Callable[[str, int, Mutation], None]
"""Told `(site, replica index, mutation)` for each mutation recorded."""
AnswerListener = Callable[[str, int, bool], None]
"""Told `(site, replica index, failed)` for each judged answer recorded."""
ANSWERS_KEPT = 10_000
"""Judged answers a log keeps for a front to read (the oldest go first)."""


class MutationLog:
    """The mutations seen on `site_map`'s replicas, numbered from 1 (`seq`), the newest kept."""

    def __init__(self, site_map: SiteMap) -> None:
        self.site_map = site_map
        self.epoch = secrets.token_hex(8)
        """This log's own random token: a front that reads another knows the numbering began again (a
        restarted worker). Random, not the log's memory address, which a new process may reuse."""
        self._seq = 0
        self._log: deque[tuple[int, str, int, Mutation]] = deque(maxlen=MUTATIONS_KEPT)
        self._mutation_listeners: list[MutationListener] = []
        self._answer_seq = 0
        self._answers: deque[tuple[int, str, int, bool]] = deque(maxlen=ANSWERS_KEPT)
        self._answer_listeners: list[AnswerListener] = []
        self.rules = ChangeRules(site_map)
        self.reads: dict[str, Counter[str]] = {}
        """Per site, the requests a rule judged reads (rule -> count); methods that never change uncounted."""

    def judge_by(self, site_map: SiteMap) -> None:
        """Judge from now on by `site_map`'s rules (a reconfigured map with the same URLs keeps its log,
        and its numbering, but may have changed its `reads` and `changes`)."""
        if site_map is not self.rules.site_map:
            self.rules = ChangeRules(site_map)

    def listen(self, listener: MutationListener, answers: AnswerListener | None = None) -> None:
        self._mutation_listeners.append(listener)
        if answers is not None:
            self._answer_listeners.append(answers)

    def answered(self, url: str, status: int, error: str | None = None) -> bool | None:
        """A judged request's answer (a navigation or a mutation, not a fault made on purpose): kept for
        the replica it reached and told to the listeners; whether it shows the site failing (None when
        the URL is on no replica of the map)."""
        found = self.site_map.replicas_of(url)
        if not found:
            return None
        site, index = found[0]
        failed = answer_failed(status, error)
        self._answer_seq += 1
        self._answers.append((self._answer_seq, site, index, failed))
        for listener in self._answer_listeners:
            listener(site, index, failed)
        return failed

    def answers_after(self, seq: int) -> list[dict[str, Any]]:
        """The judged answers recorded after `seq`, oldest first (numbered without gaps, as mutations)."""
        newer = reversed(list(islice(reversed(self._answers), max(self._answer_seq - seq, 0))))
        return [{"seq": s, "site": placeholder(site), "index": index, "failed": failed}
                for s, site, index, failed in newer]  # fmt: skip

    def record(
        self,
        url: str,
        session: str,
        method: str,
        when: float | None = None,
        *,
        content_type: str = "",
        body: bytes | None = None,
    ) -> Mutation | None:
        """A request through the proxy (any session's, inside its lease or not). One that changes a
        replica (`ChangeRules.judge`: its method, URL, content type and body) is logged and told to the
        listeners; None when it only reads or is on no site the map knows of."""
        if method.upper() not in MUTATION_METHODS:
            return None
        found = self.site_map.replicas_of(url)
        if not found:
            return None
        site, index = found[0]
        try:
            judged = self.rules.judge(method, url, content_type, body)
        except Exception:  # capture goes on whatever a body does to the rules; the replica counts as changed
            logger.exception("webarena-live: judging %s %s failed; counted as a change", method, url)
            judged = CHANGE_UNJUDGED
        if not judged.change:
            self.reads.setdefault(site, Counter())[judged.rule] += 1
            return None
        self._seq += 1
        mutation = Mutation(session, method.upper(), url, time.time() if when is None else when, self._seq)
        self._log.append((self._seq, site, index, mutation))
        for listener in self._mutation_listeners:
            listener(site, index, mutation)
        return mutation

    def mutations_after(self, seq: int) -> list[dict[str, Any]]:
        """The mutations recorded after `seq`, oldest first (what a fleet's front asks its workers). The
        numbers run without gaps, so they are the log's last `newest - seq` entries, read from the right:
        a front asks on every finish, and the cost is what is new, not everything kept."""
        newer = reversed(list(islice(reversed(self._log), max(self._seq - seq, 0))))
        return [
            {"seq": s, "site": placeholder(site), "index": index, **mutation.view()}
            for s, site, index, mutation in newer
        ]

    def reads_view(self) -> dict[str, dict[str, int]]:
        """Per site placeholder, the requests judged reads by a rule (what `/health` shows)."""
        return {placeholder(site): dict(counts) for site, counts in sorted(self.reads.items())}


def add_reads(status: dict[str, Any], *views: dict[str, dict[str, int]]) -> dict[str, Any]:
    """`status` (`ReplicaPool.status`) with each site's `reads_by_rule` summed over `views` (the single
    process's own log; a fleet's front, every worker's)."""
    for view in views:
        for site, counts in view.items():
            entry = status["sites"].get(site)
            if entry is None:
                continue
            total = entry.setdefault("reads_by_rule", {})
            for rule, count in counts.items():
                total[rule] = total.get(rule, 0) + int(count)
    return status
