"""browser-use (0.13) as its users write it, its own `Agent` loop with a scripted chat model, Debian's
Chromium, through a session's own address of a real `serve` in front of the demo shop.

browser-use pins what our Python 3.11 install cannot take (an `mcp` 2.1 whose HTTP stack needs the h11
that mitmproxy 11 refuses, and another `mcp` than the test extra's 2.3): scripts/bootstrap.sh runs these
tests in .venv-browseruse (Python 3.13, the package's wheel and browser-use). Elsewhere they are not
collected.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from importlib.util import find_spec
from pathlib import Path

import pytest

from tests.support.serve_process import Served, shop

if find_spec("browser_use") is None:
    collect_ignore_glob = ["test_*.py"]

__all__ = ["shop"]  # a fixture

# What a user sets beside the recipe's code: browser-use's telemetry and cloud sync off (read when
# browser_use is first imported, so before any test module imports it).
os.environ.setdefault("ANONYMIZED_TELEMETRY", "false")
os.environ.setdefault("BROWSER_USE_CLOUD_SYNC", "false")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, shop: str) -> Iterator[tuple[Served, Path]]:
    """`serve` with the demo shop mapped and outputs in `out`: (served, out)."""
    from tests.support.rewards import serve_shop

    tmp = tmp_path_factory.mktemp("browseruse")
    served, out = serve_shop(tmp, shop)
    yield served, out
    print(served.stop()[-3000:])
