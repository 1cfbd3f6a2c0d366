"""The agents' own routes as plain functions over a real task file and real sessions: the progress of a
session's task and the preview of its finish, which say what a finish would without finishing."""

from __future__ import annotations

import pytest

from tests.support.addon_helpers import NAVIGATE_TASK
from tests.support.control_in_process import call, shop_context, visit
from webarena_live.control.context import ControlContext

NAVIGATE_DONE = {"action": "navigate", "status": "SUCCESS", "results": None}


@pytest.fixture
def context(tmp_path) -> ControlContext:
    return shop_context(tmp_path)


def test_progress_and_preview_say_what_a_finish_would_without_finishing(context, tmp_path):
    call(context, "POST", "/sessions", {"task_id": NAVIGATE_TASK, "session": "p"})
    status, body = call(context, "POST", "/sessions/p/preview", NAVIGATE_DONE)
    assert (status, body["error"]) == (409, "no_events")  # exactly when a finish would refuse
    visit(context, "p", "/")
    status, progress = call(context, "GET", "/sessions/p/progress")
    assert status == 200 and progress["events"] == 1
    assert [item["satisfied"] for item in progress["network"]] == [False]
    assert progress["last_navigation"]["event"] == 0 and progress["last_navigation"]["matches"] is False
    early = call(context, "POST", "/sessions/p/preview", NAVIGATE_DONE)[1]
    assert early["preview"] is True and early["status"] == "failure"
    visit(context, "p", "/products/7")
    progress = call(context, "GET", "/sessions/p/progress")[1]
    assert progress["network"][0]["satisfied"] and progress["network"][0]["event"] == 1
    preview = call(context, "POST", "/sessions/p/preview", NAVIGATE_DONE)[1]
    assert not (tmp_path / "out" / str(NAVIGATE_TASK)).exists()  # a preview writes nothing
    assert call(context, "GET", "/sessions/p")[1]["state"] == "running"
    finished = call(context, "POST", "/sessions/p/finish", NAVIGATE_DONE)[1]
    assert preview.pop("preview") is True and "preview" not in finished
    assert preview == finished  # the same document, but for the flag
    # Finished: a preview says what a finish says now (the same answer's result, another's refusal).
    assert call(context, "POST", "/sessions/p/preview", NAVIGATE_DONE)[1] == {**finished, "preview": True}
    other = {**NAVIGATE_DONE, "status": "FAILURE"}
    assert call(context, "POST", "/sessions/p/preview", other)[1]["error"] == "different_answer"


def test_progress_and_preview_need_a_task(context):
    visit(context, "idle", "/")
    for method, path in (("GET", "/sessions/idle/progress"), ("POST", "/sessions/idle/preview")):
        status, body = call(context, method, path, NAVIGATE_DONE if method == "POST" else b"")
        assert (status, body["error"]) == (409, "no_task")
    assert call(context, "GET", "/sessions/nobody/progress")[0] == 404
