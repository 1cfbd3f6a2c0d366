"""Fixtures of the command tests."""

from __future__ import annotations

import pytest

from tests.support.wheel import InstalledWheel, install_wheel


@pytest.fixture(scope="session")
def installed_wheel(tmp_path_factory: pytest.TempPathFactory) -> InstalledWheel:
    """The wheel of this checkout in a fresh venv (built once per test session)."""
    return install_wheel(tmp_path_factory.mktemp("wheel"))
