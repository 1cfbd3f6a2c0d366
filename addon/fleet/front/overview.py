"""What the front answers about every worker at once: `GET /health` and `GET /sessions`.

Each worker is asked with a deadline (`HEALTH_DEADLINE`, `ASK_DEADLINE` in `fleet/front/link.py`); one
that does not answer is listed as such, and its running sessions are listed from what the front
knows of them (their task, worker and node): no session drops out of the list because its worker is
silent or restarting. Every row names its `worker` and `node`. See docs/architecture.md, Workers.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from starlette.requests import Request

from webarena_live.control.errors import Relayed
from webarena_live.evaluator import __version__
from webarena_live.fleet.front import liveness
from webarena_live.fleet.front.link import HEALTH_DEADLINE

if TYPE_CHECKING:
    from webarena_live.fleet.front.front import Front


async def health(front: Front, request: Request) -> dict[str, Any]:
    """`GET /health` of the fleet: every worker's state, answered within `HEALTH_DEADLINE`."""
    asked = [w for w in front.workers if w.up and w.index not in front.placement.down]
    replies = await asyncio.gather(*(front.link.health(worker, HEALTH_DEADLINE) for worker in asked))
    healths = {w.index: reply for w, reply in zip(asked, replies, strict=True) if reply is not None}
    for worker in asked:
        if worker.index in healths:
            liveness.note(worker, True)  # it answers: its routes too, from now on
    first = next(iter(healths.values()), {"status": "restarting", "version": __version__})
    held = front.placement.held_ports()
    workers = []
    for worker in front.workers:
        state = front.state_of(worker)
        if state in ("up", "unresponsive"):  # this answer's own probe says which
            state = "up" if worker.index in healths else "unresponsive"
        workers.append({
            "index": worker.index, "pid": worker.pid, "state": state, "node": worker.node,
            "host": worker.host, "actor": worker.actor, "proxy_port": worker.ports.proxy,
            "session_port": worker.ports.session, "control_port": worker.ports.control,
            "session_ports": sorted(port for name, port in held.items()
                                    if front.placement.owner(name) == worker.index),
            "sessions": healths.get(worker.index, {}).get("sessions", 0),
            "running": len(front.placement.running_on(worker.index)),
            "restarts": worker.restarts,
            "refused_strangers": healths.get(worker.index, {}).get("refused_strangers", 0),
        })  # fmt: skip
    answer = {**first, "sessions": sum(w["sessions"] for w in workers), "workers": workers}
    answer["refused_strangers"] = sum(w["refused_strangers"] for w in workers)
    answer["lost_sessions"] = len(front.registry.lost)
    answer["control_token"] = bool(
        front.link.token
    )  # this port's, not the workers' (a Ray fleet's own token)
    answer.update(front.listening)
    if front.faults_file and isinstance(answer.get("faults"), dict):
        answer["faults"] = {**answer["faults"], "source": front.faults_file}
    for own in ("memory", "web_port"):  # a worker's own; each worker answers them on its port
        answer.pop(own, None)
    if front.registry.outputs is not None:  # the workers write on their nodes; the files are carried here
        answer["output_dir"], answer["journal_dir"] = str(front.registry.outputs.output_dir), None
    return answer


async def sessions(front: Front, request: Request) -> list[dict[str, Any]]:
    """`GET /sessions` of the fleet; raises a worker's refusal of the request (token, page guard)."""
    replies = await front.link.ask_all(request, "/sessions")
    live: list[dict[str, Any]] = []
    resumable: dict[str, dict[str, Any]] = {}
    for worker, reply in replies:
        if reply is None:
            continue
        for view in reply.json()["sessions"]:
            if view.get("state") == "resumable":
                resumable.setdefault(view["journal"], {**view, "worker": worker.index, "node": worker.node})
            else:
                live.append({**view, "worker": worker.index, "node": worker.node})
    journals = {view.get("journal") for view in live}
    seen = {view["session"] for view in live}
    answered = {worker.index for worker, reply in replies if reply is not None}
    for name in front.placement.held_ports():  # the sessions of a worker that is silent or restarting
        owner = front.placement.owner(name)
        if name in seen or name not in front.registry.starts or owner is None:
            continue
        worker = front.workers[owner]
        state = front.state_of(worker)
        if owner in answered:
            state = "restarting"  # it answered without the session: resuming it
        live.append({"session": name, "state": "running", "task_id": front.registry.starts[name]["task_id"],
                     "run": front.registry.starts[name].get("run"), "worker": owner, "node": worker.node,
                     "worker_state": state, "worker_restarting": state == "restarting"})  # fmt: skip
        seen.add(name)
    rest = [view for path, view in resumable.items() if path not in journals and view["session"] not in seen]
    finished = [view for name, view in front.registry.finished.items() if name not in seen]
    seen.update(front.registry.finished)
    lost = [view for name, view in front.registry.lost.items() if name not in seen]
    return live + finished + rest + lost


async def journal_holders(front: Front, request: Request, name: str) -> list[int]:
    """The workers that list an unfinished journal of session `name` (a `resume_journal` start after
    `serve` restarted goes to one of them: with `--ray` a journal is on one node only)."""
    try:
        replies = await front.link.ask_all(request, "/sessions")
    except Relayed:
        return []
    return [
        worker.index
        for worker, reply in replies
        if reply is not None
        and any(v.get("state") == "resumable" and v.get("session") == name for v in reply.json()["sessions"])
    ]
