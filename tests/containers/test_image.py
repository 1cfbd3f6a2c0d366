"""The test image shaped like WebArena-Verified's official ones (tests/containers/image/), run through a
real Podman service with the docker package: the site keeps its state in the container, env-ctrl's
`/restart` makes a new site process on the same data (what the official `/restart` does), and only a new
container from the image is back to the seeded state."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import docker.models.containers
import pytest
import requests

from tests.support.engines import (
    ENV_CTRL_PORT,
    REDDIT,
    SHOPPING,
    SITE_PORT,
    SLOW_SITE,
    TEST_LABEL,
    Engine,
    ulimits,
)
from webarena_live.launch import free_ports

SEED = ["seed-order"]


@dataclass
class Copy:
    container: docker.models.containers.Container
    site: str  # http://127.0.0.1:PORT, the copy's own URL
    ctrl: str  # its env-ctrl


def run_copy(
    engine: Engine, image: str = SHOPPING, *, name: str | None = None, ports: tuple[int, int] | None = None,
    environment: Mapping[str, str] | None = None,
) -> Copy:  # fmt: skip
    site_port, ctrl_port = ports or free_ports(2)
    site = f"http://127.0.0.1:{site_port}"
    container = engine.client().containers.run(
        image, detach=True, name=name, labels={TEST_LABEL: "1"}, ulimits=ulimits(),
        ports={f"{SITE_PORT}/tcp": ("127.0.0.1", site_port),
               f"{ENV_CTRL_PORT}/tcp": ("127.0.0.1", ctrl_port)},
        environment={"WA_ENV_CTRL_EXTERNAL_SITE_URL": site, **(environment or {})},
    )  # fmt: skip
    return Copy(container, site, f"http://127.0.0.1:{ctrl_port}")


def status(copy: Copy) -> dict | None:
    """env-ctrl's /status, or None while it does not answer yet."""
    try:
        answer = requests.get(f"{copy.ctrl}/status", timeout=5)
    except requests.ConnectionError:
        return None
    assert answer.status_code == 200, answer.text
    return answer.json()


def wait_ready(copy: Copy, timeout: float = 30) -> float:
    """Seconds until env-ctrl says the site is up (and the site answers its health path)."""
    started = time.monotonic()
    while not ((answer := status(copy)) and answer["success"]):
        logs = copy.container.logs
        assert time.monotonic() - started < timeout, f"not ready in {timeout}s: {answer}\n{logs()!r}"
        time.sleep(0.1)
    assert requests.get(f"{copy.site}/customer/account/login", timeout=5).status_code == 200
    return time.monotonic() - started


def orders(copy: Copy) -> list[str]:
    answer = requests.get(f"{copy.site}/orders", timeout=5)
    assert answer.status_code == 200, answer.text
    return answer.json()["orders"]


def order(copy: Copy, name: str) -> list[str]:
    answer = requests.post(f"{copy.site}/order", data={"name": name}, timeout=5)
    assert answer.status_code == 200, answer.text
    return answer.json()["orders"]


def status_answer(success: bool, state: str) -> dict:
    """env-ctrl's /status answer, in the shape of the reference's `Result.to_dict`."""
    details = {"value": {"services": {"shop": state}}, "exec_logs": []}
    return {"success": success, "message": "", "details": details}


def whoami(copy: Copy) -> dict:
    return requests.get(f"{copy.site}/whoami", timeout=5).json()


@pytest.fixture
def shop(engine: Engine) -> Iterator[Copy]:
    copy = run_copy(engine)
    wait_ready(copy)
    yield copy


def test_the_site_answers_on_its_host_port_with_the_seeded_state_and_takes_orders(shop: Copy) -> None:
    assert orders(shop) == SEED
    for health in ("/customer/account/login", "/login"):  # the shop's and the forum's official health paths
        assert requests.get(f"{shop.site}{health}", timeout=5).status_code == 200
    assert order(shop, "first") == [*SEED, "first"]
    answer = requests.post(f"{shop.site}/order", json={"name": "second"}, timeout=5)
    assert answer.status_code == 200 and answer.json()["orders"] == [*SEED, "first", "second"]
    refused = requests.post(f"{shop.site}/order", data={"name": " "}, timeout=5)
    assert refused.status_code == 400 and "name" in refused.json()["error"]
    assert requests.get(f"{shop.site}/nowhere", timeout=5).status_code == 404
    assert orders(shop) == [*SEED, "first", "second"]


def test_env_ctrl_answers_like_the_official_server(shop: Copy) -> None:
    assert status(shop) == status_answer(True, "RUNNING")
    for method in ("GET", "POST"):  # there is no /reset: the reference's server answers 404 to anything else
        missing = requests.request(method, f"{shop.ctrl}/reset", timeout=5)
        assert (missing.status_code, missing.json()) == (404, {"success": False, "error": "Not found"})
    order(shop, "kept")
    stopped = requests.post(f"{shop.ctrl}/stop", timeout=15)
    assert stopped.status_code == 200 and stopped.json()["success"] is True
    assert status(shop) == status_answer(False, "STOPPED")
    with pytest.raises(requests.ConnectionError):
        requests.get(f"{shop.site}/orders", timeout=5)
    started = requests.post(f"{shop.ctrl}/start?wait=1", timeout=30)
    assert started.status_code == 200 and started.json()["success"] is True, started.text
    assert started.json()["details"]["value"] == {"services": {"shop": "RUNNING"}}
    assert orders(shop) == [*SEED, "kept"]
    init = requests.post(f"{shop.ctrl}/init", timeout=30)
    assert init.status_code == 200 and init.json()["success"] is True
    assert status(shop)["success"] is True  # type: ignore[index]


def test_restart_makes_a_new_site_process_and_keeps_the_data(shop: Copy) -> None:
    before = whoami(shop)
    order(shop, "restart-order")
    restarted = requests.post(f"{shop.ctrl}/restart?wait=1", timeout=30)
    assert restarted.status_code == 200 and restarted.json()["success"] is True, restarted.text
    after = whoami(shop)
    assert after["pid"] != before["pid"] and after["started"] > before["started"]  # a new process...
    same = ("hostname", "supervisor_started")  # ... in the same container
    assert [after[key] for key in same] == [before[key] for key in same]
    assert orders(shop) == [*SEED, "restart-order"]  # ... on the same data: nothing was reset


def test_restart_without_wait_answers_at_once_and_status_follows_the_site(engine: Engine) -> None:
    copy = run_copy(engine, environment={"SITE_START_DELAY": "3"})
    wait_ready(copy)
    restarted = requests.post(f"{copy.ctrl}/restart", timeout=10)
    assert restarted.status_code == 200 and restarted.json()["success"] is True
    assert status(copy)["details"]["value"] == {"services": {"shop": "STARTING"}}  # type: ignore[index]
    assert 2 < wait_ready(copy) < 15


def test_a_new_container_from_the_image_has_the_seeded_state_again(engine: Engine) -> None:
    ports = tuple(free_ports(2))
    first = run_copy(engine, name="shop-copy", ports=ports)  # type: ignore[arg-type]
    wait_ready(first)
    order(first, "changed")
    old = whoami(first)
    first.container.remove(force=True)
    second = run_copy(engine, name="shop-copy", ports=ports)  # type: ignore[arg-type]
    wait_ready(second)
    assert second.container.id != first.container.id
    assert orders(second) == SEED
    assert whoami(second)["supervisor_started"] > old["supervisor_started"]
    assert engine.container_names() == ["shop-copy"]


def test_the_page_links_point_at_the_copys_external_url(shop: Copy) -> None:
    page = requests.get(f"{shop.site}/", timeout=5)
    assert page.status_code == 200 and "seed-order" in page.text
    for path in ("/orders", "/customer/account/login"):
        assert f'href="{shop.site}{path}"' in page.text
    assert f'action="{shop.site}/order"' in page.text


def test_a_start_delay_keeps_the_site_and_its_status_not_ready(engine: Engine) -> None:
    copy = run_copy(engine, environment={"SITE_START_DELAY": "5"})
    started = time.monotonic()
    while status(copy) is None:  # env-ctrl listens at once...
        assert time.monotonic() - started < 10
        time.sleep(0.05)
    assert status(copy)["details"]["value"] == {"services": {"shop": "STARTING"}}  # type: ignore[index]
    with pytest.raises(requests.ConnectionError):  # ... the site only after its delay
        requests.get(f"{copy.site}/customer/account/login", timeout=5)
    wait_ready(copy)
    assert 4 < time.monotonic() - started < 20
    slow = engine.client().images.get(SLOW_SITE).attrs["Config"]["Env"]
    assert "SITE_START_DELAY=20" in slow  # the slow image: a start of tens of seconds, as Magento's


def test_sigterm_stops_the_container_at_once_and_cleanly(shop: Copy) -> None:
    started = time.monotonic()
    shop.container.stop(timeout=20)
    assert time.monotonic() - started < 5
    shop.container.reload()
    assert (shop.container.status, shop.container.attrs["State"]["ExitCode"]) == ("exited", 0)


def test_the_forum_image_is_the_same_program(engine: Engine) -> None:
    forum = run_copy(engine, REDDIT)
    wait_ready(forum)
    assert requests.get(f"{forum.site}/login", timeout=5).status_code == 200
    assert orders(forum) == SEED


def test_two_engines_do_not_see_each_others_containers(engine: Engine, second_engine: Engine) -> None:
    one = run_copy(engine, name="shop-0")
    other = run_copy(second_engine, name="shop-0")  # the same name: another engine, another namespace
    wait_ready(one)
    wait_ready(other)
    order(one, "only-here")
    assert (orders(one), orders(other)) == ([*SEED, "only-here"], SEED)
    ids = {e.url: {c.id for c in e.client().containers.list(all=True)} for e in (engine, second_engine)}
    assert ids == {engine.url: {one.container.id}, second_engine.url: {other.container.id}}
    assert engine.container_names() == second_engine.container_names() == ["shop-0"]
    one.container.remove(force=True)
    assert engine.container_names() == [] and second_engine.container_names() == ["shop-0"]
    assert orders(other) == SEED
