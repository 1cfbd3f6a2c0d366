"""`webarena-live mcp` driven by the MCP SDK's own client (`mcp`, 2.3), against a real `serve` in front
of the demo shop.

The SDK needs Python 3.12 or newer (the `[mcp]` extra says why): scripts/bootstrap.sh runs these tests
in .venv-3.13, whose `test` extra brings it. Elsewhere they are not collected.
"""

from __future__ import annotations

from collections.abc import Iterator
from importlib.util import find_spec
from pathlib import Path

import pytest

from tests.support.serve_process import Served, shop

if find_spec("mcp") is None:
    collect_ignore_glob = ["test_*.py"]

__all__ = ["shop"]  # a fixture


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, shop: str) -> Iterator[tuple[Served, Path]]:
    """`serve` with the demo shop mapped, outputs in `out`, a control token required: (served, out)."""
    from tests.mcp.agent import TOKEN
    from tests.support.serve_process import start_serve

    tmp = tmp_path_factory.mktemp("mcp")
    served, _, _ = start_serve(tmp, shop, tmp / "state", "--output-dir", str(tmp / "out"),
                               "--control-token", TOKEN)  # fmt: skip
    yield served, tmp / "out"
    print(served.stop()[-3000:])
