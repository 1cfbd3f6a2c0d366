"""BrowserGym's environment over the demo shop with three replicas, each with a reset endpoint that
really restores it, behind a real `serve --isolation readers`.

These tests need BrowserGym (the `[browsergym]` extra, Python 3.12): scripts/bootstrap.sh runs them in
.venv-browsergym. Elsewhere they are not collected (BrowserGym is not a test dependency of .venv).
Playwright is pointed at Debian's Chromium (webarena_live.browsergym.use_debian_chromium): BrowserGym's
chat window launches Playwright's own Chromium, which these machines cannot download.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path

import pytest

if find_spec("browsergym") is None or find_spec("browsergym.core") is None:
    collect_ignore_glob = ["test_*.py"]
else:
    from webarena_live.browsergym import use_debian_chromium

    use_debian_chromium()

from tests.site.harness import ProxyProcess, oracle_dataset, start_proxy, write_config
from webarena_live.demo import site as demo_site
from webarena_live.demo.reset import ResetServer
from webarena_live.evaluator import default_tasks_path


@dataclass
class Shop:
    url: str
    reset: ResetServer


@pytest.fixture(scope="module")
def shops() -> Iterator[list[Shop]]:
    made = []
    for _ in range(3):
        server = demo_site.serve("127.0.0.1", 0)
        reset = ResetServer(("127.0.0.1", 0), server.reset)
        threading.Thread(target=reset.serve_forever, daemon=True).start()
        made.append((server, Shop(server.url, reset)))
    yield [shop for _, shop in made]
    for server, shop in made:
        server.shutdown()
        shop.reset.shutdown()
        shop.reset.server_close()


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("browsergym")


@pytest.fixture(scope="module")
def proxy(workdir: Path, shops: list[Shop]) -> Iterator[ProxyProcess]:
    replicas = [{"urls": [shop.url], "reset_url": shop.reset.url} for shop in shops]
    config = write_config(workdir / "sites.json", {"__SHOPPING__": {"replicas": replicas}})
    running = start_proxy(workdir / "proxy", tasks=default_tasks_path(), config=config,
                          extra_args=["--isolation", "readers"])  # fmt: skip
    yield running
    running.stop()


@pytest.fixture(scope="module")
def oracle_config(workdir: Path, shops: list[Shop], official_dataset: Path) -> Path:
    """The reference's config: every replica's URL under the site's `urls`, so each derenders."""
    dataset = oracle_dataset(official_dataset, default_tasks_path(), workdir / "oracle-dataset.json")
    return write_config(workdir / "oracle-config.json", {"__SHOPPING__": {"urls": [s.url for s in shops]}},
                        test_data_file=dataset)  # fmt: skip
