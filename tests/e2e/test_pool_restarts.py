"""The pool remembers: a replica changed when `serve` stopped (SIGTERM) or was killed (SIGKILL) is reset
by the next `serve` on the same output directory before anyone leases it; `--reset-at-start` resets every
replica first. Real `serve` processes, replicas of a real counter site with real reset endpoints
(`tests/support/counter_replicas.py`), requests through the sessions' own proxy addresses.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.site.harness import ProxyProcess, start_proxy
from tests.support.counter_replicas import DEMO_TASKS, MUTATE, READ, READ_TOO, counter_config, counters

pytestmark = pytest.mark.timeout(300)


def serve(workdir: Path, config: Path, *more: str) -> ProxyProcess:
    return start_proxy(
        workdir, tasks=DEMO_TASKS, config=config, extra_args=["--isolation", "exclusive", *more]
    )


def start(proxy: ProxyProcess, task_id: int, session: str, **more: Any) -> dict[str, Any]:
    body = {"task_id": task_id, "session": session, **more}
    reply = requests.post(f"{proxy.control_url}/sessions", json=body, timeout=60)
    assert reply.status_code == 200, reply.text
    return reply.json()


def remembered(proxy: ProxyProcess) -> dict[str, Any]:
    return json.loads((proxy.output_dir / ".pool.json").read_text())


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_replica_changed_before_a_restart_is_reset_before_its_next_lease(
    tmp_path: Path, how: signal.Signals
) -> None:
    with counters(2, delay=0.5) as replicas:
        config = counter_config(tmp_path / "sites.json", replicas)
        first = serve(tmp_path / "serve", config)
        try:
            writer = start(first, MUTATE, "writer")
            changed = next(r for r in replicas if r.url == writer["replicas"]["__SHOPPING__"])
            clean = next(r for r in replicas if r is not changed)
            through = {"http": writer["proxy"]}
            assert requests.post(f"{changed.url}/add", proxies=through, timeout=30).status_code == 200
            assert changed.value == 1
            kept = remembered(first)["replicas"]["__SHOPPING__"]
            assert [r["dirty"] for r in kept] == [r is changed for r in replicas]  # on disk already
            assert first.process is not None
            first.process.send_signal(how)
            first.process.wait(timeout=60)
        finally:
            first.stop()
        assert changed.value == 1 and changed.reset.done == 0  # nobody reset it on the way out

        second = serve(tmp_path / "serve", config)
        try:
            readers = [start(second, task, f"reader{task}", wait=60) for task in (READ, READ_TOO)]
            # each reader reads through its address the value its replica has: 0, the seeded one
            seen = {}
            for reader in readers:
                url = reader["replicas"]["__SHOPPING__"]
                page = requests.get(f"{url}/", proxies={"http": reader["proxy"]}, timeout=30)
                seen[url] = page.text
            health = requests.get(f"{second.control_url}/health", timeout=30).json()["pool"]
        finally:
            second.stop()
    assert changed.reset.done == 1 and clean.reset.done == 0  # only the changed one, once
    assert all("<p id=n>0</p>" in text for text in seen.values()), seen
    history = health["sites"]["__SHOPPING__"]["replicas"][replicas.index(changed)]["resets"]
    assert [(h["ok"], h["why"], h["after"]) for h in history] == [(True, "changed before a restart", None)]


def test_reset_at_start_resets_every_replica_before_the_first_lease(tmp_path: Path) -> None:
    with counters(2, delay=0.3) as replicas:
        replicas[0].site.value = replicas[1].site.value = 5  # copies of unknown state
        config = counter_config(tmp_path / "sites.json", replicas)
        proxy = serve(tmp_path / "serve", config, "--reset-at-start")
        try:
            leased = start(proxy, MUTATE, "first", wait=60)
            url = leased["replicas"]["__SHOPPING__"]
            page = requests.get(f"{url}/", proxies={"http": leased["proxy"]}, timeout=30)
            deadline = time.monotonic() + 30
            while any(r.reset.done == 0 for r in replicas):
                assert time.monotonic() < deadline
                time.sleep(0.1)
        finally:
            proxy.stop()
    assert "<p id=n>0</p>" in page.text
    assert [r.reset.done for r in replicas] == [1, 1] and all(r.value == 0 for r in replicas)


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_the_fleet_front_remembers_too(tmp_path: Path, how: signal.Signals) -> None:
    """`serve --workers 2`: the front's pool keeps the same file; stopped (SIGTERM) or killed (SIGKILL:
    its workers end with it) and started again, it resets the changed replica before leasing it."""
    with counters(1, delay=0.3) as (replica,):
        config = counter_config(tmp_path / "sites.json", [replica])
        first = serve(tmp_path / "serve", config, "--workers", "2")
        try:
            writer = start(first, MUTATE, "writer")
            requests.post(f"{replica.url}/add", proxies={"http": writer["proxy"]}, timeout=30)
            deadline = time.monotonic() + 30  # the front gathers the workers' mutations every 2 s
            while not remembered(first)["replicas"]["__SHOPPING__"][0]["dirty"]:
                assert time.monotonic() < deadline
                time.sleep(0.2)
            assert first.process is not None
            first.process.send_signal(how)
            first.process.wait(timeout=60)
        finally:
            first.stop()
        assert replica.value == 1 and replica.reset.done == 0
        second = serve(tmp_path / "serve", config, "--workers", "2")
        try:
            reader = start(second, READ, "reader", wait=60)
            page = requests.get(f"{replica.url}/", proxies={"http": reader["proxy"]}, timeout=30)
        finally:
            second.stop()
    assert replica.reset.done == 1 and "<p id=n>0</p>" in page.text
