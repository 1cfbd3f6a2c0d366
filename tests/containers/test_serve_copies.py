"""`serve` on a site map of container copies, with a real Podman engine and the test image shaped like
the official ones (tests/containers/image): every reader reads the seeded state, every copy a session
changed is a new container before its next lease, and a restarted `serve` adopts what runs."""

from __future__ import annotations

import signal
from pathlib import Path

import requests

from tests.containers.sessions import (
    READ,
    SEEDED,
    WRITE,
    Attempt,
    pool_site,
    run_agent,
    serve,
    settled,
    shop_map,
)
from tests.support.engines import Engine
from tests.support.serve_process import wait_until


def test_fifty_sessions_on_two_copies_readers_read_the_seed_and_a_changed_copy_is_new_before_its_next_lease(
    tmp_path: Path, engine: Engine
) -> None:
    config = shop_map(tmp_path / "map.json", [engine.url])
    proxy = serve(tmp_path / "serve", config, "--isolation", "exclusive")
    try:
        wait_until("both copies made and ready", lambda: settled(proxy.control_url))
        attempts: list[Attempt] = []
        for number in range(50):
            task = WRITE if number % 3 == 0 else READ  # 17 writers and 33 readers, in turns
            attempts.append(run_agent(proxy.control_url, task, f"s{number}"))
        assert all(a.result["status"] == "success" for a in attempts), [
            a.result for a in attempts if a.result["status"] != "success"
        ]
        assert all(a.orders == SEEDED for a in attempts)  # nobody ever met another session's order
        last: dict[str, Attempt] = {}
        for attempt in attempts:  # a copy a writer left is a new container at its next lease
            before = last.get(attempt.copy_url)
            if before is not None and before.task_id == WRITE:
                assert attempt.container != before.container, (before, attempt)
            if before is not None and before.task_id == READ:
                assert attempt.container == before.container  # only read: kept, not made again
            last[attempt.copy_url] = attempt
        assert len({a.copy_url for a in attempts}) == 2
        site = pool_site(proxy.control_url)
        assert site["resets"] >= 15 and site["resets_failed"] == 0
        assert site["resets_skipped"] >= 30
    finally:
        proxy.stop()
    assert engine.container_names() == [], "serve removes its copies when it stops"


def test_a_restarted_serve_adopts_the_running_copies_and_makes_the_changed_one_new_before_leasing_it(
    tmp_path: Path, engine: Engine
) -> None:
    config = shop_map(tmp_path / "map.json", [engine.url])
    workdir = tmp_path / "serve"
    proxy = serve(workdir, config, "--isolation", "exclusive")
    wait_until("both copies ready", lambda: settled(proxy.control_url))
    ids = {row["name"]: row["id"] for row in _containers(engine)}
    started = requests.post(
        f"{proxy.control_url}/sessions", json={"task_id": WRITE, "session": "w"}, timeout=60
    ).json()
    changed = started["replicas"]["__SHOPPING__"]
    placed = requests.post(
        f"{changed}/order", data={"name": "x"}, proxies={"http": started["proxy"]}, timeout=30
    )
    assert placed.status_code == 200
    wait_until("the pool knows the copy changed", lambda: any(
        r["url"] == changed and r["state"] == "leased" for r in pool_site(proxy.control_url)["replicas"]
    ))  # fmt: skip
    proxy.process.send_signal(signal.SIGKILL)  # type: ignore[union-attr]
    proxy.process.wait(30)  # type: ignore[union-attr]
    assert sorted(ids) == sorted(r["name"] for r in _containers(engine))  # still running after the kill
    again = serve(workdir, config, "--isolation", "exclusive")
    try:
        wait_until("both copies back", lambda: settled(again.control_url))
        now = {row["name"]: row["id"] for row in _containers(engine)}
        assert sorted(now) == sorted(ids), "no duplicate, none forgotten"
        changed_name = next(
            r["name"] for r in _containers(engine) if str(r["port"]) == changed.rsplit(":", 1)[1]
        )
        assert now[changed_name] != ids[changed_name], "the changed copy is a new container"
        kept = [name for name in ids if name != changed_name]
        assert all(now[name] == ids[name] for name in kept), "the unchanged copy is adopted as it runs"
        for number in range(2):  # both copies, one after the other: the seeded state on each
            attempt = run_agent(again.control_url, READ, f"r{number}")
            assert attempt.orders == SEEDED and attempt.result["status"] == "success"
    finally:
        again.stop()


def _containers(engine: Engine) -> list[dict[str, object]]:
    rows = []
    for container in engine.client().containers.list():
        bindings = container.attrs["HostConfig"]["PortBindings"] or {}
        port = next(iter(bindings.get("80/tcp") or [{}])).get("HostPort")
        rows.append({"name": container.name, "id": container.id, "port": port})
    return rows
