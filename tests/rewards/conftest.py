"""The reward tests' fixtures: the demo shop and a real `serve` in front of it, one per test module."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.rewards import serve_shop
from tests.support.serve_process import Served, shop

__all__ = ["shop"]  # a fixture


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, shop: str) -> Iterator[tuple[Served, Path]]:
    """`serve` with the demo shop mapped and an output directory: (served, out)."""
    tmp = tmp_path_factory.mktemp("rewards")
    served, out = serve_shop(tmp, shop)
    yield served, out
    print(served.stop()[-3000:])
