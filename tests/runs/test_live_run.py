"""The live run without HTTP: a session's attempt, prepared while it runs, finished in one call."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.support.addon_helpers import (
    MUTATE_TASK,
    NAVIGATE_TASK,
    SHOP,
    browser_headers,
    make_flow,
    write_tasks,
)
from webarena_live.evaluator import SiteMap, evaluate_task, load_tasks
from webarena_live.proxy.capture import event_from_flow
from webarena_live.runs.finish_outcome import FinishRefused, OutputsFailed
from webarena_live.runs.har_spool import SPOOL_SUBDIR
from webarena_live.runs.sessions import SessionState, SessionStore
from webarena_live.runs.settings import RunSettings

NAVIGATE_DONE = {"task_type": "NAVIGATE", "status": "SUCCESS", "retrieved_data": None}


@pytest.fixture
def store(tmp_path) -> SessionStore:
    site_map = SiteMap.from_dict({"environments": {"__SHOPPING__": {"urls": [SHOP]}}})
    return SessionStore(RunSettings(site_map, output_dir=tmp_path / "out", journal_dir=tmp_path / "journal"))


@pytest.fixture
def tasks(tmp_path):
    return load_tasks(write_tasks(tmp_path))


def visit(path: str):
    return event_from_flow(make_flow(url=f"{SHOP}{path}", headers=browser_headers(navigate=True)))


def test_a_session_with_a_task_has_a_run_and_an_idle_one_has_none(store, tasks):
    assert store.get_or_create("idle").attempt.task is None
    session = store.start("a", tasks[NAVIGATE_TASK])
    assert session.task is tasks[NAVIGATE_TASK]
    assert session.attempt.trace is session.trace


def test_finish_evaluates_writes_the_outputs_and_marks_the_session_finished(store, tasks, tmp_path):
    session = store.start("a", tasks[NAVIGATE_TASK])
    session.append(visit("/products/7"))
    outcome = session.finish(NAVIGATE_DONE)
    assert outcome.result.status.value == "success" and outcome.earlier_attempt is None
    assert set(outcome.timings) == {"evaluate", "total"} and outcome.timings["total"] >= 0
    task_dir = tmp_path / "out" / str(NAVIGATE_TASK)
    assert outcome.outputs is not None and outcome.outputs["eval_result.json"] == str(
        task_dir / "eval_result.json"
    )
    assert json.loads((task_dir / "eval_result.json").read_text()) == outcome.result.to_file_dict()
    assert json.loads((task_dir / "agent_response.json").read_text())["task_type"] == "NAVIGATE"
    assert session.state is SessionState.FINISHED and session.result is outcome.result
    assert session.attempt.outputs == outcome.outputs
    assert list((tmp_path / "out" / SPOOL_SUBDIR).iterdir()) == []  # the spool became network.har


def test_finish_again_and_without_events_are_refused_and_change_nothing(store, tasks, tmp_path):
    empty = store.start("empty", tasks[NAVIGATE_TASK])
    with pytest.raises(FinishRefused) as refused:
        empty.finish(NAVIGATE_DONE)
    assert refused.value.reason == "no_events" and empty.state is SessionState.RUNNING
    session = store.start("a", tasks[NAVIGATE_TASK])
    session.append(visit("/products/7"))
    first = session.finish(NAVIGATE_DONE)
    before = (tmp_path / "out" / str(NAVIGATE_TASK) / "eval_result.json").read_bytes()
    other = {"task_type": "NAVIGATE", "status": "FAILURE"}
    with pytest.raises(FinishRefused) as again:
        session.finish(other)
    assert again.value.reason == "different_answer"
    assert again.value.detail_body["judged"] == NAVIGATE_DONE and again.value.detail_body["refused"] == other
    # The same answer, fenced text this time: the first outcome again, judged once.
    repeat = session.finish("```json\n" + json.dumps(NAVIGATE_DONE) + "\n```")
    assert repeat.repeated and repeat.result is first.result and repeat.sites == first.sites
    assert (tmp_path / "out" / str(NAVIGATE_TASK) / "eval_result.json").read_bytes() == before


def test_a_second_attempt_keeps_the_first_and_says_where(store, tasks, tmp_path):
    for name in ("first", "second"):
        session = store.start(name, tasks[NAVIGATE_TASK])
        session.append(visit("/products/7"))
        outcome = session.finish(NAVIGATE_DONE)
    kept = tmp_path / "out" / ".attempts" / str(NAVIGATE_TASK) / "1"
    assert outcome.earlier_attempt == str(kept) and (kept / "eval_result.json").is_file()


def test_outputs_that_cannot_be_written_leave_the_session_running(store, tasks, tmp_path):
    (tmp_path / "out").write_text("a file where the output directory should be")
    session = store.start("a", tasks[NAVIGATE_TASK])
    session.append(visit("/products/7"))
    with pytest.raises(OutputsFailed):
        session.finish(NAVIGATE_DONE)
    assert session.state is SessionState.RUNNING and session.result is None


def test_without_an_output_dir_nothing_is_written(store, tasks, tmp_path):
    store.configure(output_dir=None)
    session = store.start("a", tasks[NAVIGATE_TASK])
    session.append(visit("/products/7"))
    assert session.attempt.har_spool is None
    outcome = session.finish(NAVIGATE_DONE)
    assert outcome.outputs is None and outcome.result.status.value == "success"
    assert not (tmp_path / "out").exists()


def test_settings_changed_while_running_apply_to_the_finish(store, tasks, tmp_path):
    session = store.start("a", tasks[NAVIGATE_TASK])
    session.append(visit("/products/7"))
    store.configure(redact=True)  # the spool holds unredacted entries: the finish serializes instead
    session.finish(NAVIGATE_DONE)
    har = json.loads((tmp_path / "out" / str(NAVIGATE_TASK) / "network.har").read_text())
    assert [entry["request"]["url"] for entry in har["log"]["entries"]] == [f"{SHOP}/products/7"]


def test_evaluation_is_prepared_while_the_run_goes_on_and_the_verdict_is_unchanged(store, tasks):
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    events = [visit(f"/p/{i}") for i in range(20)]
    events.append(
        event_from_flow(make_flow("POST", f"{SHOP}/cart/add", headers=form, body=b"sku=A7&qty=2", status=302))
    )
    answer = {"task_type": "MUTATE", "status": "SUCCESS", "retrieved_data": None}

    async def run() -> None:
        session = store.start("m", tasks[MUTATE_TASK])
        for event in events:
            session.append(event)
        assert session.attempt._prepare_timer is not None
        await asyncio.sleep(0.3)
        assert session.attempt._prepare_timer is None
        assert session.trace.memo  # the evaluators scanned the events already

    asyncio.run(run())
    session = store.get_or_create("m")
    live = session.finish(answer).result
    site_map = store.settings.site_map
    cold = evaluate_task(tasks[MUTATE_TASK], answer, session.trace.__class__(events), site_map=site_map)
    assert live.to_dict()["evaluators_results"] == cold.to_dict()["evaluators_results"]
