"""Real container engines for the tests of site copies made through an engine (tests/support/engines.py).

    engine          an Engine (`.url` is what a Docker client takes, `unix:///…/api.sock`; `.client()`,
                    `.podman(...)` the CLI on its storage, `.container_names()`) with the test images
                    in it; emptied of containers and volumes after each test
    second_engine   another one, with its own socket and storage: it sees none of `engine`'s containers

Both services start once per session (each pytest-xdist worker has its own slot of storages), the second
only when a test asks for it; building or copying the images happens first when they are missing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import engines
from tests.support.engines import Engine


@pytest.fixture(scope="session")
def engine_slot() -> Iterator[Path]:
    with engines.slot() as place:
        yield place


@pytest.fixture(scope="session")
def engine_service(engine_slot: Path) -> Iterator[Engine]:
    with engines.engine_in(engine_slot, 0) as running:
        yield running


@pytest.fixture(scope="session")
def second_engine_service(engine_slot: Path) -> Iterator[Engine]:
    with engines.engine_in(engine_slot, 1) as running:
        yield running


@pytest.fixture
def engine(engine_service: Engine) -> Iterator[Engine]:
    yield engine_service
    engine_service.remove_everything()


@pytest.fixture
def second_engine(second_engine_service: Engine) -> Iterator[Engine]:
    yield second_engine_service
    second_engine_service.remove_everything()


@pytest.fixture(autouse=True)
def own_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The copies' keeper remembers its containers in the test's own state folder, never the user's."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
