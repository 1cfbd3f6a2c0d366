"""Spares: with `spares: 1` a changed copy is retired at once and a ready spare takes its place, so no
session waits for a reset while resets keep up; with none, the next session waits for the copy's
recreation, and a refusal says so. With a site slow to start (the test image's slow variant, ready tens
of seconds after its container starts, as Magento is), no session is handed a copy that is not ready."""

from __future__ import annotations

import time
from pathlib import Path

import requests

from tests.containers.sessions import WRITE, browse_and_finish, pool_site, serve, settled, shop_map, start
from tests.support.engines import SLOW_SITE, Engine
from tests.support.serve_process import wait_until


def shop(path: Path, engine: Engine, **entry: object) -> Path:
    return shop_map(path, [engine.url], **{"replicas": 1, **entry})


def others_settled(control: str, held: str) -> bool:
    """Every copy but the one `held` is ready: the resets have kept up."""
    return all(r["state"] == "free" for r in pool_site(control)["replicas"] if r["url"] != held)


def writers_in_a_row(control: str, count: int) -> list[float]:
    """`count` writers one after the other, each started the moment the one before finished, never
    allowed to wait (`wait: 0`); each holds its copy until the others are ready again. The seconds each
    start took."""
    took = []
    for number in range(count):
        asked = time.perf_counter()
        started = start(control, WRITE, f"w{number}", wait=0)
        took.append(time.perf_counter() - asked)
        assert started.status_code == 200, f"writer {number} waited for a reset: {started.text}"
        body = started.json()
        held = body["replicas"]["__SHOPPING__"]
        wait_until("the resets kept up", lambda held=held: others_settled(control, held))
        attempt = browse_and_finish(control, body, WRITE)
        assert attempt.result["status"] == "success" and attempt.orders == ["seed-order"]
    return took


def test_with_one_spare_no_writer_waits_for_a_reset(tmp_path: Path, engine: Engine) -> None:
    proxy = serve(tmp_path / "serve", shop(tmp_path / "map.json", engine, spares=1))
    try:
        wait_until("both copies ready", lambda: settled(proxy.control_url))
        took = writers_in_a_row(proxy.control_url, 6)
        print(f"spares 1: starts took {[round(t, 3) for t in took]} s")
        site = pool_site(proxy.control_url)
        assert site["resets"] >= 5 and site["resets_failed"] == 0
    finally:
        proxy.stop()


def test_without_a_spare_the_next_writer_waits_for_the_recreation_and_the_refusal_says_so(
    tmp_path: Path, engine: Engine
) -> None:
    proxy = serve(tmp_path / "serve", shop(tmp_path / "map.json", engine))
    try:
        wait_until("the copy ready", lambda: settled(proxy.control_url))
        first = start(proxy.control_url, WRITE, "w0", wait=0)
        assert first.status_code == 200
        browse_and_finish(proxy.control_url, first.json(), WRITE)
        refused = start(proxy.control_url, WRITE, "w1", wait=0)  # the moment after: its copy is being made
        assert refused.status_code == 503, refused.text
        detail = refused.json()["detail"]
        assert "resetting (a new container" in detail and "the wait is the first to finish" in detail, detail
        assert "1 of 1 copies in use" not in detail  # the copy is free of holders: it is the reset
        asked = time.perf_counter()
        waited = start(proxy.control_url, WRITE, "w1", wait=120)
        print(f"spares 0: the next writer waited {time.perf_counter() - asked:.3f} s for the recreation")
        assert waited.status_code == 200, waited.text
        attempt = browse_and_finish(proxy.control_url, waited.json(), WRITE)
        assert attempt.orders == ["seed-order"] and attempt.result["status"] == "success"
    finally:
        proxy.stop()


def test_a_slow_site_is_never_leased_before_it_is_ready_and_with_a_spare_no_writer_waits(
    tmp_path: Path, engine: Engine
) -> None:
    config = shop(tmp_path / "map.json", engine, image=SLOW_SITE, spares=1)
    proxy = serve(tmp_path / "serve", config)
    try:
        early = start(proxy.control_url, WRITE, "early", wait=0)  # the copies are still starting
        assert early.status_code == 503 and "resetting" in early.json()["detail"], early.text
        started = start(proxy.control_url, WRITE, "early", wait=180)
        assert started.status_code == 200, started.text
        body = started.json()
        first = requests.get(
            f"{body['replicas']['__SHOPPING__']}/orders", proxies={"http": body["proxy"]}, timeout=30
        )
        assert first.status_code == 200 and first.json()["orders"] == ["seed-order"]  # ready when handed out
        requests.post(f"{proxy.control_url}/sessions/early/abandon", json={}, timeout=30)
        wait_until("the copies ready again", lambda: settled(proxy.control_url))
        took = writers_in_a_row(proxy.control_url, 2)
        print(f"slow site, spares 1: starts took {[round(t, 3) for t in took]} s")
    finally:
        proxy.stop()
