"""A finish's interference (`Session.finish`): read through `Interference` before anything is judged, it
goes into the verdict and the session's view as its JSON, and the log counts every change by the other
sessions, however many are listed."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from tests.support.addon_helpers import NAVIGATE_TASK, SHOP, write_tasks
from webarena_live.evaluator import NetworkEvent
from webarena_live.evaluator.tasks import load_tasks
from webarena_live.replicas import Interference, Mutation
from webarena_live.runs.sessions import Session, SessionState, SessionStore
from webarena_live.runs.settings import RunSettings

GAVE_UP = {"task_type": "NAVIGATE", "status": "FAILURE"}


def started(tmp_path: Path, name: str) -> Session:
    task = load_tasks(write_tasks(tmp_path))[NAVIGATE_TASK]
    session = SessionStore(RunSettings(journal_dir=None)).start(name, task)
    session.append(NetworkEvent("GET", f"{SHOP}/products/7", 200, started=time.time()))  # its one page
    return session


@pytest.mark.parametrize("as_dict", [False, True])
def test_an_exposed_finish_keeps_the_interferences_json_and_logs_every_change_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, as_dict: bool
) -> None:
    changes = [Mutation(who, "POST", f"{SHOP}/cart/{i}", 10.0 + i) for i, who in enumerate("bab" * 50)]
    seen = Interference.of(changes, {"__SHOPPING__": SHOP}).listed(2)  # 150 changes, 2 listed
    session = started(tmp_path, "carol")
    with caplog.at_level(logging.WARNING, logger="webarena_live.runs.sessions"):
        outcome = session.finish(GAVE_UP, interference=seen.view() if as_dict else seen)
    assert outcome.result.interference == seen.view() and seen.view()["count"] == 150
    assert session.describe()["interference"] == seen.view()
    (warning,) = [r.getMessage() for r in caplog.records if "exposed" in r.getMessage()]
    assert "150 mutation(s)" in warning and "(a, b)" in warning, warning  # the listed ones' sessions


def test_a_finish_nobody_interfered_with_says_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    session = started(tmp_path, "dave")
    with caplog.at_level(logging.WARNING, logger="webarena_live.runs.sessions"):
        outcome = session.finish(GAVE_UP, interference=Interference.none().view())
    assert outcome.result.interference == {"exposed": False, "count": 0, "mutations": [], "replicas": {}}
    assert not [r for r in caplog.records if "exposed" in r.getMessage()]


def test_an_interference_that_is_none_changes_nothing(tmp_path: Path) -> None:
    session = started(tmp_path, "erin")
    with pytest.raises(ValidationError):
        session.finish(GAVE_UP, interference={"exposed": True, "mutations": []})
    assert session.state is SessionState.RUNNING and session.result is None
    assert session.finish(GAVE_UP).result.interference is None
