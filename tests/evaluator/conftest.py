"""Fixtures of the evaluator's tests: the official dataset, as tasks and as the raw task documents."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from webarena_live.evaluator.tasks import TaskSet, load_tasks


@pytest.fixture(scope="session")
def official_tasks(official_dataset: Path) -> TaskSet:
    """All 812 official tasks, loaded by our task model."""
    return load_tasks(official_dataset)


@pytest.fixture(scope="session")
def official_raw(official_dataset: Path) -> dict[int, dict[str, Any]]:
    """The official task documents as the reference ships them, by task id."""
    return {task["task_id"]: task for task in json.loads(official_dataset.read_text())}
