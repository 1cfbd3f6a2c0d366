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


def _installed(module: str) -> bool:
    from importlib.util import find_spec

    return find_spec(module) is not None


# Each framework's tests run in that framework's own venv (scripts/bootstrap.sh names them and fails
# when one collects nothing); elsewhere they are not collected at all.
FRAMEWORK_TESTS = {
    "test_openenv.py": "openenv",
    "openenv_browser_env.py": "openenv",
    "test_verifiers.py": "verifiers",
    "test_verifiers_v1.py": "verifiers",
    "test_harbor.py": "harbor",
    "test_nemogym.py": "nemo_gym",
}
collect_ignore = [name for name, module in FRAMEWORK_TESTS.items() if not _installed(module)]
if _installed("verifiers"):
    import verifiers

    if not hasattr(verifiers, "Rubric"):  # 0.4 and newer: the legacy rubric's tests are 0.3's
        collect_ignore.append("test_verifiers.py")
