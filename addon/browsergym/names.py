"""Gym ids for the proxy's tasks: `browsergym/wa_live.<task_id>`.

Not `webarena...`: BrowserGym's and AgentLab's experiment loops import their own WebArena packages for
any task name that begins with `webarena` (`_get_env_name`), and AgentLab treats a benchmark whose name
contains `webarena` as one deployment that needs a manual reset between agents (its `Study`). Neither
applies to leased replicas, so the names keep clear of both.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from webarena_live.client import Client, token_from_env

ENV_PREFIX = "wa_live"


def task_name(task_id: int) -> str:
    """The task name an EnvArgs carries (BrowserGym prepends `browsergym/` to make the gym id)."""
    return f"{ENV_PREFIX}.{task_id}"


def _entry(task_id: int) -> Any:
    def make(**kwargs: Any) -> Any:
        from webarena_live.browsergym.env import LiveBrowserEnv

        return LiveBrowserEnv(task_id, **kwargs)

    return make


def ensure_registered(name: str) -> str:
    """Register `browsergym/<name>` for a `wa_live.<task_id>` name if this process has not yet (an
    experiment runs in a fresh worker process); returns the gym id. The control API's address comes
    with the environment's kwargs (`control=`, or `task_kwargs={"control": ...}`), else from
    WEBARENA_LIVE_CONTROL."""
    prefix, _, number = name.partition(".")
    if prefix != ENV_PREFIX or not number.isdigit():
        raise ValueError(f"not a webarena-live task name: {name!r} (expected '{ENV_PREFIX}.<task_id>')")
    gym_id = f"browsergym/{name}"
    if gym_id not in gym.registry:
        gym.register(id=gym_id, entry_point=_entry(int(number)), nondeterministic=True)
    return gym_id


def register_tasks(control: str, *, token: str | None = None) -> list[str]:
    """Register a gym id for every task the proxy at `control` loaded; returns their task names. The
    token defaults to $WEBARENA_LIVE_CONTROL_TOKEN, as `make_env`'s."""
    with Client(control, token=token or token_from_env(), verify=False) as client:
        names = [task_name(int(task["task_id"])) for task in client.tasks()]
    for name in names:
        ensure_registered(name)
    return names
