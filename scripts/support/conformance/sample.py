"""The random sample of stored cases that every test run re-asks the live reference about.

Stratified by kind of case (`group:case`), so that every mutation group and
every kind of mutation is in every sample, then filled at random up to the
requested size. The seed is printed by the test; setting
WEBARENA_CONFORMANCE_SEED to it draws the same sample again.
"""

from __future__ import annotations

import os
import random

SAMPLE_SIZE = 300
PER_KIND = 2


def seed_from_environment() -> int:
    configured = os.environ.get("WEBARENA_CONFORMANCE_SEED")
    return int(configured) if configured else random.SystemRandom().randrange(2**31)


def choose(kinds: dict[str, str], seed: int, size: int = SAMPLE_SIZE) -> list[str]:
    """`size` case ids (or more, when there are more kinds than fit) out of case id -> kind."""
    rng = random.Random(seed)
    by_kind: dict[str, list[str]] = {}
    for case_id in sorted(kinds):
        group = case_id.split("/")[0]
        by_kind.setdefault(f"{group}:{kinds[case_id]}", []).append(case_id)
    chosen = {case_id for ids in by_kind.values() for case_id in rng.sample(ids, min(PER_KIND, len(ids)))}
    rest = sorted(kinds.keys() - chosen)
    chosen.update(rng.sample(rest, max(0, min(len(rest), size - len(chosen)))))
    return sorted(chosen)
