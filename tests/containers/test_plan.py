"""The copies a site map asks for, planned before any engine is asked (`sites/plan.py`): names, ports,
URLs, engines, the official defaults, and every mistake told in one line naming the key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from webarena_live.evaluator import SiteConfigError
from webarena_live.sites import OFFICIAL_SITES, load_site_map, split_config
from webarena_live.sites.spec import default_ulimits


def planned(environments: dict[str, object]):  # type: ignore[no-untyped-def]
    return split_config({"environments": environments}, source="map.json")


def test_an_official_site_takes_the_references_image_ports_and_health_path_and_each_copy_names_itself() -> (
    None
):
    data, plan = planned({"__SHOPPING__": {"replicas": 3, "engines": ["unix:///run/e.sock"]}})
    assert plan is not None
    copies = plan.sites["shopping"].copies
    assert [c.name for c in copies] == [
        "webarena-live-shopping-0",
        "webarena-live-shopping-1",
        "webarena-live-shopping-2",
    ]
    assert [c.url for c in copies] == [
        "http://127.0.0.1:7770",
        "http://127.0.0.1:7870",
        "http://127.0.0.1:7970",
    ]
    assert copies[1].ports == ((80, 7870), (8877, 7871))  # the reference's 7770/7771, then a stride of 100
    assert dict(copies[1].env)["WA_ENV_CTRL_EXTERNAL_SITE_URL"] == "http://127.0.0.1:7870"
    assert copies[0].image == OFFICIAL_SITES["shopping"].image == "am1n3e/webarena-verified-shopping"
    assert copies[0].health_url == "http://127.0.0.1:7770/customer/account/login"
    assert copies[0].env_ctrl_url == "http://127.0.0.1:7771"
    # what the site map reads: the copies as replicas, each derendering to the placeholder
    assert data["environments"]["__SHOPPING__"] == {"replicas": [{"urls": [c.url]} for c in copies]}
    assert plan.ceilings == {"shopping": 3}


def test_spares_are_more_copies_that_no_lease_may_take_beyond_the_replicas() -> None:
    _, plan = planned({"__REDDIT__": {"replicas": 2, "spares": 1, "engines": ["unix:///e"]}})
    assert plan is not None and len(plan.copies) == 3 and plan.ceilings == {"reddit": 2}


def test_copies_spread_over_the_engines_and_take_each_engines_host() -> None:
    _, plan = planned({"__GITLAB__": {"replicas": 3, "engines": ["tcp://10.1.2.3:2375", "ssh://me@box"]}})
    assert plan is not None
    assert [(c.engine, c.url) for c in plan.copies] == [
        ("tcp://10.1.2.3:2375", "http://10.1.2.3:8023"),
        ("ssh://me@box", "http://box:8123"),
        ("tcp://10.1.2.3:2375", "http://10.1.2.3:8223"),
    ]


def test_the_shops_admin_keeps_its_path_and_every_official_sites_ports_differ_whatever_the_copies() -> None:
    sites = {f"__{name.upper()}__": {"replicas": 8, "engines": ["unix:///e"]} for name in OFFICIAL_SITES}
    _, plan = planned(sites)  # no two copies share a port: the sites' ports differ modulo the stride
    assert plan is not None and len(plan.copies) == 8 * len(OFFICIAL_SITES)
    assert plan.sites["shopping_admin"].copies[0].url == "http://127.0.0.1:7780/admin"


def test_a_site_of_our_own_names_its_image_and_ports_and_its_volumes_are_its_copies_own() -> None:
    volumes = [{"target": "/var/lib/db"}, {"target": "/data", "source": "/srv/data", "mode": "shared-ro"}]
    entry = {"image": "mine/site:1", "port": 8000, "host_port": 30000, "replicas": 2, "engines": ["unix:///e"],
             "env_ctrl_port": None, "health_path": "/", "volumes": volumes, "env": {"MODE": "test"},
             "use_header_login": False}  # fmt: skip
    data, plan = planned({"__SHOPPING__": entry})
    assert plan is not None
    first, second = plan.copies
    assert first.env_ctrl_url is None and first.ports == ((8000, 30000),)
    assert first.volumes == (
        ("webarena-live-shopping-0-var-lib-db", "/var/lib/db", "own"),
        ("/srv/data", "/data", "shared-ro"),
    )
    assert second.own_volumes == ["webarena-live-shopping-1-var-lib-db"]
    assert not first.keeps_changes
    assert data["environments"]["__SHOPPING__"]["use_header_login"] is False  # the site's own keys stay
    assert first.spec_hash != second.spec_hash  # another port, another volume: another container


def test_the_maps_volumes_are_shared_so_a_changed_map_copy_cannot_be_made_new() -> None:
    _, plan = planned({"__MAP__": {"replicas": 1, "engines": ["unix:///e"]}})
    assert plan is not None and plan.copies[0].keeps_changes


def test_wikipedias_data_folder_is_mounted_read_only_into_every_copy() -> None:
    _, plan = planned({"__WIKIPEDIA__": {"replicas": 2, "data_dir": "/srv/wiki", "engines": ["unix:///e"]}})
    assert plan is not None
    assert all(c.volumes == (("/srv/wiki", "/data", "shared-ro"),) for c in plan.copies)


SHOP = "environments.__SHOPPING__"


@pytest.mark.parametrize(
    ("site", "entry", "told"),
    [
        ("__SHOPPING__", {"replicas": 0}, f"{SHOP}.replicas: Input should be greater than or equal to 1"),
        ("__SHOPPING__", {"replicas": 2, "spares": "x"}, f"{SHOP}.spares: Input should be a valid integer"),
        (
            "__SHOPPING__",
            {"replicas": 1, "engines": ["/run/e.sock"]},
            "must be a unix://, tcp:// or ssh:// URL",
        ),
        ("__SHOPPING__", {"replicas": 2, "imgae": "x"}, f"{SHOP}.imgae: Extra inputs are not permitted"),
        ("__SHOPPING__", {"replicas": 2, "reset_url": "http://h/restart"}, 'has no "urls" or "reset_url"'),
        ("__HOMEPAGE__", {"image": "mine/x", "host_port": 1}, "__HOMEPAGE__.port: Field required"),
    ],
)
def test_a_mistake_in_a_container_entry_is_one_line_naming_the_key(
    site: str, entry: dict[str, object], told: str
) -> None:
    with pytest.raises(SiteConfigError) as error:
        planned({site: entry})
    assert told in str(error.value) and str(error.value).startswith("map.json: ")


def test_two_copies_on_one_port_are_refused_naming_both() -> None:
    engines = ["unix:///e"]
    sites = {"__SHOPPING__": {"replicas": 2, "host_port": 9000, "port_stride": 1, "engines": engines},
             "__REDDIT__": {"host_port": 9001, "env_ctrl_host_port": 9500, "engines": engines}}  # fmt: skip
    with pytest.raises(SiteConfigError) as error:
        planned(sites)
    assert "would both publish port 9001" in str(error.value)


def test_a_map_without_images_is_left_as_it_is() -> None:
    data = {"environments": {"__SHOPPING__": {"urls": ["http://127.0.0.1:7770"]}}}
    assert split_config(data, source="m") == (data, None)


def test_load_site_map_gives_the_map_of_the_copies_urls(tmp_path: Path) -> None:
    path = tmp_path / "map.json"
    path.write_text(json.dumps({"environments": {"__SHOPPING__": {"replicas": 2, "engines": ["unix:///e"]}}}))
    site_map, plan = load_site_map(path)
    assert plan is not None
    assert site_map.urls == {"__SHOPPING__": ("http://127.0.0.1:7770", "http://127.0.0.1:7870")}
    assert site_map.derender("http://127.0.0.1:7870/orders") == "__SHOPPING__/orders"


def test_the_default_limits_never_pass_this_machines_own() -> None:
    import resource

    limits = default_ulimits()
    for name in ("nofile", "nproc"):
        hard = resource.getrlimit(getattr(resource, f"RLIMIT_{name.upper()}"))[1]
        assert hard == resource.RLIM_INFINITY or limits[name] <= hard


def test_serve_refuses_a_map_whose_engine_does_not_answer_in_one_line(tmp_path: Path) -> None:
    import subprocess
    import sys

    from tests.containers.sessions import TASKS
    from tests.site.harness import free_port

    config = tmp_path / "map.json"
    missing = f"unix://{tmp_path}/no-engine.sock"
    config.write_text(json.dumps({"environments": {"__SHOPPING__": {"replicas": 2, "engines": [missing]}}}))
    ports = [
        arg for flag in ("--port", "--session-port", "--control-port") for arg in (flag, str(free_port()))
    ]
    cli = Path(sys.executable).parent / "webarena-live"
    done = subprocess.run([str(cli), "serve", "--tasks", str(TASKS), "--config", str(config), *ports],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = [line for line in done.stderr.splitlines() if "container engine" in line]
    assert f"cannot reach the container engine at {missing}" in line and "podman system service" in line
