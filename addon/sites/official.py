"""What each official WebArena-Verified site's container needs, as the reference's container
configuration states it (ServiceNow/webarena-verified v1.2.3,
`src/webarena_verified/environments/container/config.py`, `DEFAULT_CONTAINER_CONFIGS`): its image, the
ports inside the container (the site, and the environment-control server `env-ctrl`), the host ports the
reference publishes them on, the path its readiness check asks, and the data it keeps outside the
container's writable layer. Written out here (the reference is not imported at run time); a site map
entry overrides any of it (docs/guides/official-dataset.md, Copies as containers).

What a reset of such a copy is (docs/reliability.md, Resets of the official sites): each image keeps the
site's data (MySQL, PostgreSQL, files) in the container's writable layer, and its env-ctrl `/restart`
only restarts the services under supervisor, keeping that data (`packages/environment_control`,
`ops/mixins/supervisor.py`). The reference's own reset (`SiteHandler.reset`) removes the container and
starts a new one from the image; so does ours (`sites/copies.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

VolumeMode = Literal["own", "shared", "shared-ro"]
"""How a copy holds a volume: `own` (made empty with the copy, filled from the image, removed with it:
new again at every recreation), `shared-ro` (one volume or folder every copy mounts read-only), `shared`
(one every copy mounts writable: a copy that changed can then not be made new by recreation)."""


@dataclass(frozen=True)
class OfficialVolume:
    target: str
    """Where the container mounts it."""
    name: str | None = None
    """The named volume (shared ones: the reference's own names, filled by its `setup`)."""
    mode: VolumeMode = "shared"


@dataclass(frozen=True)
class OfficialSite:
    image: str
    port: int
    """The site's port inside the container."""
    env_ctrl_port: int
    """env-ctrl's port inside the container (`WA_ENV_CTRL_PORT`)."""
    host_port: int
    """Where the reference publishes the site on the host: the first copy's port here."""
    env_ctrl_host_port: int
    health_path: str
    volumes: tuple[OfficialVolume, ...] = field(default=())
    data_dir: str | None = None
    """A folder of the host the reference bind-mounts at this path (Wikipedia's ZIM file): a site map
    entry names the folder (`data_dir`), mounted read-only into every copy."""


def _map_volume(name: str, target: str) -> OfficialVolume:
    return OfficialVolume(target=target, name=f"webarena_verified_map_{name}", mode="shared")


OFFICIAL_SITES: dict[str, OfficialSite] = {
    "shopping": OfficialSite(
        "am1n3e/webarena-verified-shopping", 80, 8877, 7770, 7771, "/customer/account/login"
    ),
    "shopping_admin": OfficialSite("am1n3e/webarena-verified-shopping_admin", 80, 8877, 7780, 7781, "/"),
    "reddit": OfficialSite("am1n3e/webarena-verified-reddit", 80, 8877, 9999, 9998, "/login"),
    "gitlab": OfficialSite("am1n3e/webarena-verified-gitlab", 8023, 8877, 8023, 8024, "/users/sign_in"),
    # The wiki is kiwix-serve over one ZIM file, bind-mounted from the host: nothing a task does changes it.
    "wikipedia": OfficialSite(
        "am1n3e/webarena-verified-wikipedia", 8080, 8874, 8888, 8889, "/", data_dir="/data"
    ),
    # The map's databases live in named volumes the reference's `setup` fills from its tarballs; every
    # copy mounts the same ones, as the reference's one container does. No map task changes the map.
    "map": OfficialSite(
        "am1n3e/webarena-verified-map",
        8080,
        8877,
        3000,
        3001,
        "/",
        volumes=(
            _map_volume("tile_db", "/data/database"),
            _map_volume("routing_car", "/data/routing/car"),
            _map_volume("routing_bike", "/data/routing/bike"),
            _map_volume("routing_foot", "/data/routing/foot"),
            _map_volume("nominatim_db", "/data/nominatim/postgres"),
            _map_volume("nominatim_flatnode", "/data/nominatim/flatnode"),
            _map_volume("website_db", "/var/lib/postgresql/14/main"),
            _map_volume("tiles", "/data/tiles"),
            _map_volume("style", "/data/style"),
        ),
    ),
}
"""By site name (`shopping`, ...): the reference's defaults."""

EXTERNAL_URL_ENV = "WA_ENV_CTRL_EXTERNAL_SITE_URL"
"""The variable each official image's entrypoint reads for the site's own URL (env-ctrl's
`_internal/config.py`): the site's links and redirects point there, so each copy names itself."""

ENV_CTRL_PORT_ENV = "WA_ENV_CTRL_PORT"
