"""Which workers answer: a worker that is alive but stops answering (stopped, its machine cut off) is
`unresponsive`, not dead.

The front asks each worker that is up for `/health` every `PROBE_EVERY` seconds; `MISSES` probes in
a row unanswered within `PROBE_DEADLINE` make it `unresponsive`: its routes answer a JSON 503 at
once (calls to it in flight are given up, `WorkerLink.send`), `/health` lists it so, and its sessions are
kept. The first answer makes it `up` again. Death is the workers' to find (a process that exits, a Ray
actor that dies); silence alone never loses a session. See docs/architecture.md, Workers.
"""

from __future__ import annotations

import asyncio
import logging

from webarena_live.fleet.front.front import Front
from webarena_live.fleet.workers.local import Worker

logger = logging.getLogger("webarena_live.fleet")

PROBE_EVERY = 1.0
PROBE_DEADLINE = 2.0
MISSES = 2
"""Probes in a row unanswered before a worker is `unresponsive`: known within
PROBE_EVERY + MISSES * (PROBE_DEADLINE + PROBE_EVERY) seconds of its last answer."""


async def watch(front: Front) -> None:
    """Probe every worker that is up, for ever (cancelled when the front stops)."""
    while True:
        await asyncio.sleep(PROBE_EVERY)
        workers = [w for w in front.workers if w.up and w.index not in front.placement.down]
        answers = await asyncio.gather(*(_answers(front, worker) for worker in workers))
        for worker, answered in zip(workers, answers, strict=True):
            if worker.up and worker.index not in front.placement.down:  # not restarted meanwhile
                note(worker, answered)


def note(worker: Worker, answered: bool) -> None:
    """One probe's outcome for `worker`."""
    if answered:
        was_responsive = worker.responsive
        worker.revive()  # as a restarted worker: it answers, whatever it did before
        if not was_responsive:
            logger.warning("webarena-live: worker %d answers again; its sessions go on", worker.index)
        return
    worker.misses += 1
    if worker.misses >= MISSES and worker.responsive:
        worker.responsive = False
        worker.stalled.set()
        logger.warning(
            "webarena-live: worker %d (pid %s) does not answer; its routes answer 503 until it does, "
            "its sessions are kept", worker.index, worker.pid,
        )  # fmt: skip


async def _answers(front: Front, worker: Worker) -> bool:
    return await front.link.health(worker, PROBE_DEADLINE) is not None
