"""webarena-live from Ray code: the fleet of `serve --ray` started from a driver, its sessions and
verdicts handed out as Ray calls.

    import ray
    from webarena_live.ray import start_fleet

    ray.init()
    fleet = start_fleet(workers=4, config="sites.json", output_dir="out")

    @ray.remote
    def episode(fleet, task_id):
        near = ray.get_runtime_context().get_node_id()  # a worker on this task's own node
        started = ray.get(fleet.start.remote(task_id, near=near))
        answer = ...  # browse through started["proxy"], then the agent's final response
        return ray.get(fleet.finish.remote(started["session"], answer))["score"]

    rewards = ray.get([episode.remote(fleet, task_id) for task_id in task_ids])
    ray.get(fleet.stop.remote())

`start_fleet` places a `Fleet` actor on the driver's node. It runs `webarena-live serve --workers N
--ray <this cluster>` there: the control API, the dashboard and the output directory stay on the
driver's machine, and the proxy workers are Ray actors over the cluster's nodes. Any task or actor
given the handle calls it. Needs `pip install 'webarena-live[ray]'`. See docs/notes/scale.md.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from webarena_live.addresses.credentials import CONTROL_TOKEN_ENV
from webarena_live.client import Client
from webarena_live.fleet.workers.local import end_with_parent
from webarena_live.launch import ServeProcess

__all__ = ["Fleet", "start_fleet"]

CALLS_AT_ONCE = 64
"""Control calls the fleet's handle serves at a time (each waits on the control API, not the CPU)."""


class Fleet:
    """The `serve --ray` process of one fleet, and its control API as Ray calls (a Ray actor: create it
    with `start_fleet`)."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        address = ray.get_runtime_context().gcs_address
        self.serve = ServeProcess(
            *argv, "--ray", address, env=env, own_session=True, preexec_fn=end_with_parent,
        )  # fmt: skip
        self.serve.start(timeout=180)  # the workers start on the cluster first
        self.client = Client(
            self.serve.control_url, token=env.get("WEBARENA_LIVE_CONTROL_TOKEN"), timeout=120
        )

    def control_url(self) -> str:
        """The control API and the dashboard (on the driver's node)."""
        return self.serve.control_url

    def health(self) -> dict[str, Any]:
        return self.client.health()

    def sessions(self) -> list[dict[str, Any]]:
        return self.client.sessions()

    def start(self, task_id: int, *, session: str | None = None, **options: Any) -> dict[str, Any]:
        """`POST /sessions`: the session's name (a new one unless given), its own `proxy` address, its
        worker and node; options as the route's (`near`, `run`, `restart`, `reset`, ...)."""
        name = session or f"ray-{uuid.uuid4().hex[:12]}"
        return self.client.start(task_id, session=name, **options).model_dump(mode="json")

    def preview(self, session: str, answer: Any) -> dict[str, Any]:
        return self.client.preview(session, answer).model_dump(mode="json")

    def finish(self, session: str, answer: Any) -> dict[str, Any]:
        """The verdict (`eval_result.json`'s document); its files are in the output directory."""
        return self.client.finish(session, answer).model_dump(mode="json")

    def stop(self) -> int | None:
        """Stop the fleet as Ctrl-C stops `serve`: the workers first, each reporting unfinished sessions."""
        self.client.close()
        return self.serve.stop()

    def log(self) -> str:
        """What the `serve --ray` process printed so far."""
        return self.serve.log_tail(1_000_000)


def start_fleet(
    workers: int = 2,
    *,
    tasks: str | os.PathLike[str] | None = None,
    config: str | os.PathLike[str] | None = None,
    output_dir: str | os.PathLike[str] | None = None,
    token: str | None = None,
    serve_args: tuple[str, ...] = (),
) -> Any:
    """A `Fleet` actor on this driver's node, once its workers answer: its handle.

    `tasks` is a dataset file or name (`demo`, `webarena-verified`), `config` the site map, `output_dir`
    where every finished session's files go (on this machine); paths are taken from this process's
    directory. `serve_args` are more `webarena-live serve` flags. Call `ray.init()` first.
    """
    argv = ["--workers", str(workers), *serve_args]
    for flag, value in (("--tasks", tasks), ("--config", config), ("--output-dir", output_dir)):
        if value is not None:
            given = Path(value)
            named = flag == "--tasks" and not given.exists()  # a dataset name, not a file
            argv += [flag, str(value) if named else str(given.resolve())]
    env = {CONTROL_TOKEN_ENV: token} if token else {}
    here = ray.get_runtime_context().get_node_id()
    remote_fleet: Any = ray.remote(Fleet)
    actor = remote_fleet.options(
        scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=False),
        num_cpus=0,
        max_concurrency=CALLS_AT_ONCE,
        name=f"webarena-live-fleet-{uuid.uuid4().hex[:8]}",
    )
    handle: Any = actor.remote(argv, env)
    ray.get(handle.health.remote())  # raises the fleet's start error here, with its log's last lines
    return handle
