"""The engines' own state and more than one engine: a copy whose container is killed from outside is
noticed (not only by failed answers), named in the verdict of the session it broke, and made new; copies
spread over two engines are each made new on their own; under `--workers 2` the front alone owns them."""

from __future__ import annotations

from pathlib import Path

import requests

from tests.containers.sessions import (
    READ,
    SEEDED,
    WRITE,
    browse_and_finish,
    pool_site,
    run_agent,
    serve,
    settled,
    shop_map,
    start,
)
from tests.support.engines import Engine
from tests.support.serve_process import wait_until


def test_a_copy_killed_from_outside_is_noticed_named_in_the_verdict_and_made_new(
    tmp_path: Path, engine: Engine
) -> None:
    proxy = serve(tmp_path / "serve", shop_map(tmp_path / "map.json", [engine.url], replicas=1))
    try:
        wait_until("the copy ready", lambda: settled(proxy.control_url))
        started = start(proxy.control_url, READ, "victim").json()
        copy_url, proxies = started["replicas"]["__SHOPPING__"], {"http": started["proxy"]}
        assert (
            requests.get(copy_url, proxies=proxies, headers={"Accept": "text/html"}, timeout=30).status_code
            == 200
        )
        (container,) = engine.client().containers.list()
        before = container.id
        container.kill()  # from outside: nobody told the proxy
        wait_until(
            "the engine's state noticed", lambda: "failing" in pool_site(proxy.control_url)["replicas"][0]
        )
        failing = pool_site(proxy.control_url)["replicas"][0]["failing"]
        assert "its container" in failing and "exited" in failing, failing
        refused = requests.get(copy_url, proxies=proxies, headers={"Accept": "text/html"}, timeout=30)
        assert refused.status_code == 502  # the agent met the dead copy
        answer = {"task_type": "retrieve", "status": "SUCCESS", "retrieved_data": SEEDED}
        result = requests.post(f"{proxy.control_url}/sessions/victim/finish", json=answer, timeout=60).json()
        assert result["sites_answered"] is False and result["site_errors"]["count"] >= 1, result
        wait_until("made new", lambda: settled(proxy.control_url))
        (remade,) = engine.client().containers.list()
        assert remade.id != before and remade.status == "running"
        assert run_agent(proxy.control_url, READ, "after").result["status"] == "success"
    finally:
        proxy.stop()


def test_copies_spread_over_two_engines_and_each_is_made_new_on_its_own(
    tmp_path: Path, engine: Engine, second_engine: Engine
) -> None:
    proxy = serve(tmp_path / "serve", shop_map(tmp_path / "map.json", [engine.url, second_engine.url]))
    try:
        wait_until("both copies ready", lambda: settled(proxy.control_url))
        first, second = engine.client().containers.list(), second_engine.client().containers.list()
        assert len(first) == 1 and len(second) == 1  # one copy on each, neither sees the other's
        for turn in range(2):  # two writers at once, one on each copy, twice
            starts = [start(proxy.control_url, WRITE, f"w{turn}-{n}").json() for n in range(2)]
            assert {s["replicas"]["__SHOPPING__"] for s in starts} == set(settled_urls(proxy.control_url))
            for started in starts:
                attempt = browse_and_finish(proxy.control_url, started, WRITE)
                assert attempt.result["status"] == "success" and attempt.orders == SEEDED
            wait_until("made new", lambda: settled(proxy.control_url))
        now_first, now_second = engine.client().containers.list(), second_engine.client().containers.list()
        assert len(now_first) == 1 and len(now_second) == 1
        assert now_first[0].id != first[0].id and now_second[0].id != second[0].id
        assert now_first[0].name == first[0].name and now_second[0].name == second[0].name
    finally:
        proxy.stop()
    assert engine.container_names() == [] and second_engine.container_names() == []


def settled_urls(control: str) -> list[str]:
    return [r["url"] for r in pool_site(control)["replicas"]]


def test_under_two_workers_the_front_owns_the_copies(tmp_path: Path, engine: Engine) -> None:
    proxy = serve(
        tmp_path / "serve", shop_map(tmp_path / "map.json", [engine.url]), "--workers", "2", timeout=120
    )
    try:
        wait_until("both copies ready", lambda: settled(proxy.control_url))
        assert len(engine.container_names()) == 2  # made once, by the front: no worker made its own
        attempts = [run_agent(proxy.control_url, WRITE if n % 2 else READ, f"s{n}") for n in range(6)]
        assert all(a.result["status"] == "success" and a.orders == SEEDED for a in attempts)
        workers = {
            s["worker"]
            for s in requests.get(f"{proxy.control_url}/sessions", timeout=30).json()
            if "worker" in s
        }
        assert len(workers) == 2 or workers == set(), workers
        assert len(engine.container_names()) == 2
        wait_until("made new", lambda: settled(proxy.control_url))
        site = pool_site(proxy.control_url)
        assert site["resets"] == 3, site  # each writer's copy made new, by the front
    finally:
        proxy.stop()
    assert engine.container_names() == []
