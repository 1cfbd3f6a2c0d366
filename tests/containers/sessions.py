"""What the copies' tests do again and again: a site map of container copies of the test image, a real
`webarena-live serve` on it, and agents as plain HTTP clients through each session's own address: a
reader (task 5001: it reads the orders and answers them) and a writer (task 5002: it places an order).
Each agent first asks the copy it was leased who it is (`/whoami`: the container's hostname is its id),
so a test can tell a new container from an old one."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

from tests.site.harness import ProxyProcess, free_port, start_proxy

TASKS = Path(__file__).with_name("tasks.json")
READ, WRITE = 5001, 5002
SEEDED = ["seed-order"]


def write_map(path: Path, sites: dict[str, dict[str, Any]]) -> Path:
    path.write_text(json.dumps({"environments": sites}))
    return path


def shop_map(path: Path, engines: list[str], **entry: Any) -> Path:
    """A map of the shop's copies on `engines` (two unless told), on free ports of this machine."""
    port = free_port()
    site = {"replicas": 2, "host_port": port, "env_ctrl_host_port": port + 1, "port_stride": 2,
            "engines": engines, **entry}  # fmt: skip
    return write_map(path, {"__SHOPPING__": site})


def serve(workdir: Path, config: Path, *args: str, timeout: float = 60) -> ProxyProcess:
    return start_proxy(workdir, tasks=TASKS, config=config, extra_args=args, timeout=timeout)


@dataclass
class Attempt:
    session: str
    task_id: int
    copy_url: str
    container: str
    """The hostname of the copy's container: podman's short container id."""
    orders: list[str]
    result: dict[str, Any]


def start(control: str, task_id: int, session: str, *, wait: float = 120) -> requests.Response:
    return requests.post(
        f"{control}/sessions", json={"task_id": task_id, "session": session, "wait": wait}, timeout=wait + 60
    )


def run_agent(
    control: str, task_id: int, session: str, *, wait: float = 120, name: str = "container-order"
) -> Attempt:
    """One whole session: started, browsed through its own address, finished; its verdict and what it
    saw of its copy."""
    started = start(control, task_id, session, wait=wait)
    assert started.status_code == 200, started.text
    return browse_and_finish(control, started.json(), task_id, name=name)


def browse_and_finish(
    control: str, started: dict[str, Any], task_id: int, *, name: str = "container-order"
) -> Attempt:
    session, copy_url = started["session"], started["replicas"]["__SHOPPING__"]
    proxies = {"http": started["proxy"]}
    who = requests.get(f"{copy_url}/whoami", proxies=proxies, timeout=30).json()
    orders = requests.get(f"{copy_url}/orders", proxies=proxies, timeout=30).json()["orders"]
    if task_id == WRITE:
        placed = requests.post(f"{copy_url}/order", data={"name": name}, proxies=proxies, timeout=30)
        assert placed.status_code == 200, placed.text
        answer: dict[str, Any] = {"task_type": "mutate", "status": "SUCCESS", "retrieved_data": None}
    else:
        answer = {"task_type": "retrieve", "status": "SUCCESS", "retrieved_data": orders}
    finished = requests.post(f"{control}/sessions/{session}/finish", json=answer, timeout=120)
    assert finished.status_code == 200, finished.text
    return Attempt(session, task_id, copy_url, who["hostname"], orders, finished.json())


def pool_site(control: str) -> dict[str, Any]:
    health = requests.get(f"{control}/health", timeout=30).json()
    site: dict[str, Any] = health["pool"]["sites"]["__SHOPPING__"]
    return site


def settled(control: str) -> bool:
    """Every copy in service and none being made new."""
    site = pool_site(control)
    return all(r["state"] in ("free", "leased") for r in site["replicas"])
