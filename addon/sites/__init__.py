"""Copies of the sites as containers: a site map entry that names an image and a number of copies, made,
made new and removed through a container engine (docs/architecture.md, Copies as containers;
docs/guides/official-dataset.md).

- `plan`: the copies a map asks for (names, engines, ports, URLs), a pure function of the map, so every
  process that reads it derives the same site map; `load_site_map` reads a file with them.
- `engine`: the one seam to an engine (`Engine`), over the Docker Engine API (`DockerEngine`).
- `copies`: the keeper (`CopyKeeper`) that makes, adopts, makes new, watches and removes the copies; the
  pool calls it through each copy's `ResetWay` (`CopyReset`).
- `official`: each official site's image, ports, health path and volumes, as the reference states them.

Owns: container copies. May import: the evaluator's public names, `replicas` (the reset outcome and the
state folder), httpx, the `docker` package and the standard library; below `runs` and `control`, which
never need it, and beside nothing that imports mitmproxy.
"""

from webarena_live.sites.copies import CopyKeeper, CopyReset
from webarena_live.sites.engine import ContainerState, DockerEngine, Engine, EngineError
from webarena_live.sites.official import OFFICIAL_SITES
from webarena_live.sites.plan import CopyPlan, SitesPlan, load_site_map, split_config
from webarena_live.sites.spec import ContainerSite

__all__ = [
    "OFFICIAL_SITES",
    "ContainerSite",
    "ContainerState",
    "CopyKeeper",
    "CopyPlan",
    "CopyReset",
    "DockerEngine",
    "Engine",
    "EngineError",
    "SitesPlan",
    "load_site_map",
    "split_config",
]
