"""Sessions and their on-disk journal."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from datetime import UTC, datetime

from tests.support.addon_helpers import NAVIGATE_TASK, SHOP, browser_headers, make_flow, write_tasks
from tests.support.paths import REPO
from webarena_live.evaluator.har import load_trace
from webarena_live.evaluator.results import EvalStatus
from webarena_live.evaluator.tasks import load_tasks
from webarena_live.evaluator.trace import NetworkEvent
from webarena_live.proxy.capture import event_from_flow
from webarena_live.runs import sessions as sessions_module
from webarena_live.runs.journal import Journal, journal_filename
from webarena_live.runs.recovery import find_journal, journal_started, read_journal
from webarena_live.runs.sessions import (
    DEFAULT_SESSION,
    EVENT,
    NoticeKind,
    SessionState,
    SessionStore,
    session_name_problem,
)
from webarena_live.runs.settings import RunSettings


def _page(path: str) -> NetworkEvent:
    return event_from_flow(make_flow(url=f"{SHOP}{path}", headers=browser_headers(navigate=True)))


GAVE_UP = {"task_type": "NAVIGATE", "status": "FAILURE"}
"""A final answer that fails the navigate task."""


def test_get_or_create_finds_the_same_session(tmp_path):
    store = SessionStore(RunSettings(journal_dir=tmp_path))
    first = store.get_or_create("alice")
    assert store.get_or_create("alice") is first
    assert store.get("bob") is None
    assert first.state is SessionState.IDLE and first.task is None
    assert len(store) == 1


def test_start_clears_the_trace_and_restart_clears_it_again(tmp_path):
    task = load_tasks(write_tasks(tmp_path))[NAVIGATE_TASK]
    store = SessionStore(RunSettings(journal_dir=tmp_path / "journal"))
    session = store.get_or_create(DEFAULT_SESSION)
    session.append(_page("/before"))
    assert len(session.trace) == 1
    store.start(DEFAULT_SESSION, task)
    assert len(session.trace) == 0 and session.state is SessionState.RUNNING and session.task is task
    session.append(_page("/products/7"))
    store.start(DEFAULT_SESSION, task)
    assert len(session.trace) == 0


def test_finished_session_keeps_its_trace_and_ignores_late_events(tmp_path):
    task = load_tasks(write_tasks(tmp_path))[NAVIGATE_TASK]
    session = SessionStore(RunSettings(journal_dir=None)).start("carol", task)
    session.append(_page("/products/7"))
    session.finish(GAVE_UP)
    assert session.append(_page("/late")) is False
    assert len(session.trace) == 1 and session.attempt.late_events == 1
    view = session.describe()
    assert view["state"] == "finished" and view["late_events"] == 1
    assert view["result"] == {"status": EvalStatus.FAILURE.value, "score": 0.0}
    assert view["counts"]["navigation"] == 1 and view["counts"]["total"] == 1


def test_sessions_are_isolated(tmp_path):
    store = SessionStore(RunSettings(journal_dir=tmp_path))
    store.get_or_create("alice").append(_page("/a"))
    store.get_or_create("bob").append(_page("/b"))
    assert [e.url for e in store.get_or_create("alice").trace] == [f"{SHOP}/a"]
    assert [e.url for e in store.get_or_create("bob").trace] == [f"{SHOP}/b"]


def test_subscribers_hear_resets_the_verdict_and_each_event(tmp_path):
    """Capture builds nothing for a watcher: an event only wakes it, and the stream reads the trace
    (control/streams.py)."""
    task = load_tasks(write_tasks(tmp_path))[NAVIGATE_TASK]
    store = SessionStore()
    session = store.get_or_create("dave")
    heard: list[tuple[str, dict | None]] = []
    woken: list[int] = []
    everyone: list[tuple[str, str]] = []

    def own(subject, kind, payload):
        if kind == EVENT:
            woken.append(len(subject.trace))
        else:
            heard.append((kind, payload))

    store.notices.subscribe(own, session="dave")
    store.notices.subscribe(lambda subject, kind, payload: everyone.append((subject.name, kind)))
    store.get_or_create("other").append(_page("/elsewhere"))  # not dave's: only everyone hears it
    session.append(_page("/x"))
    view = session.event_view(0)
    assert view["index"] == 0 and view["url"] == f"{SHOP}/x" and view["type"] == "navigation"
    assert view["session"] == "dave"
    session.start(task)
    session.append(_page("/products/7"))
    session.finish(GAVE_UP)
    assert [kind for kind, _ in heard] == ["restarted", "session", "finished"]
    assert heard[0][1] is not None and heard[0][1]["task_id"] == task.task_id
    assert woken == [1, 1]
    assert everyone == [("other", EVENT)] + [("dave", kind) for kind in (EVENT, "restarted", "session", EVENT,
                                                                        "finished")]  # fmt: skip
    assert not session.append(_page("/late")) and woken == [1, 1]  # a finished session wakes nobody


def test_a_failing_subscriber_is_dropped_and_capture_goes_on(tmp_path):
    task = load_tasks(write_tasks(tmp_path))[NAVIGATE_TASK]
    store = SessionStore()
    session = store.get_or_create("erin")

    def broken(*notice):
        raise RuntimeError("subscriber bug")

    store.notices.subscribe(broken, session="erin")
    store.notices.subscribe(broken)
    assert session.append(_page("/a"))
    assert store.notices.count("erin") == 0 and store.notices.count() == 0
    session.start(task)
    assert session.append(_page("/b"))
    assert len(session.trace) == 1


def test_an_unsubscribed_subscriber_hears_nothing_more(tmp_path):
    store = SessionStore()
    heard: list[str] = []
    unsubscribe = store.notices.subscribe(lambda subject, kind, payload: heard.append(kind), session="fay")
    store.get_or_create("fay").append(_page("/a"))
    unsubscribe()
    unsubscribe()  # twice is harmless
    store.get_or_create("fay").append(_page("/b"))
    assert heard == [EVENT] and not store.notices


def test_journal_has_one_har_entry_per_event_readable_while_open(tmp_path):
    store = SessionStore(RunSettings(journal_dir=tmp_path))
    session = store.get_or_create("frank")
    session.append(_page("/one"))
    session.append(_page("/two"))
    assert session.attempt.journal is not None
    path = session.attempt.journal.path
    # Still open: every line has already been handed to the OS.
    lines = path.read_text().splitlines()
    assert [json.loads(line)["request"]["url"] for line in lines] == [f"{SHOP}/one", f"{SHOP}/two"]
    assert [event.url for event in load_trace(path)] == [f"{SHOP}/one", f"{SHOP}/two"]
    assert session.describe()["journal"] == str(path)


def test_each_run_gets_its_own_journal_file(tmp_path):
    task = load_tasks(write_tasks(tmp_path))[NAVIGATE_TASK]
    journal_dir = tmp_path / "journal"
    session = SessionStore(RunSettings(journal_dir=journal_dir)).get_or_create("gina")
    session.append(_page("/idle"))
    session.start(task)
    session.append(_page("/products/7"))
    files = sorted(journal_dir.iterdir())
    assert len(files) == 2
    assert any(f"-{NAVIGATE_TASK}-" in f.name for f in files) and any("-idle-" in f.name for f in files)


def test_journal_survives_a_crash_of_the_process(tmp_path):
    """A process killed without closing anything loses no event it had captured."""
    script = textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {str(REPO / "tests")!r})
        from pathlib import Path
        from tests.support.addon_helpers import make_flow
        from webarena_live.proxy.capture import event_from_flow
        from webarena_live.runs.settings import RunSettings
        from webarena_live.runs.sessions import SessionStore
        session = SessionStore(RunSettings(journal_dir=Path({str(tmp_path)!r}))).get_or_create("crash")
        for n in range(50):
            session.append(event_from_flow(make_flow(url=f"http://shop.test/page/{{n}}")))
        os._exit(9)  # no close, no flush at exit, no atexit handlers
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 9, done.stderr
    (journal,) = tmp_path.glob("crash-*.jsonl")
    assert [event.url for event in load_trace(journal)] == [f"http://shop.test/page/{n}" for n in range(50)]


def test_a_process_killed_while_resuming_leaves_the_whole_run_to_resume(tmp_path):
    """A worker killed while a session is resumed on it (its journal's events being written again) must
    not leave a newer, shorter journal that the next resume would take for the whole run. The kill
    lands at the 10th journal write or at the rename of the journal, whichever the resume does."""
    task_file = write_tasks(tmp_path)
    script = textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {str(REPO / "tests")!r})
        from pathlib import Path
        from tests.support.addon_helpers import make_flow
        from webarena_live.evaluator.tasks import load_tasks
        from webarena_live.proxy.capture import event_from_flow
        from webarena_live.runs import journal as journal_module
        from webarena_live.runs.settings import RunSettings
        from webarena_live.runs.recovery import find_journal, journal_started, read_journal
        from webarena_live.runs.sessions import SessionStore
        task = load_tasks(Path({str(task_file)!r}))[{NAVIGATE_TASK}]
        journals = Path({str(tmp_path / "journal")!r})
        first = SessionStore(RunSettings(journal_dir=journals)).start("kept", task)
        for n in range(50):
            first.append(event_from_flow(make_flow(url=f"http://shop.test/page/{{n}}")))
        first.close()
        original = find_journal(journals, "kept", {NAVIGATE_TASK})
        events = read_journal(original)
        writes = []
        real_write = journal_module.Journal.write
        def dying_write(self, *args, **kwargs):
            writes.append(1)
            if len(writes) == 10:
                os._exit(9)
            return real_write(self, *args, **kwargs)
        journal_module.Journal.write = dying_write
        journal_module.os.replace = lambda *args: os._exit(9)
        store = SessionStore(RunSettings(journal_dir=journals))
        resumed = store.start("kept", task, started=journal_started(original))
        resumed.resume(list(events))
        os._exit(0)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 9, done.stderr
    newest = find_journal(tmp_path / "journal", "kept", NAVIGATE_TASK)
    assert [event.url for event in load_trace(newest)] == [f"http://shop.test/page/{n}" for n in range(50)]


def test_a_resumed_run_journals_its_events_again_then_goes_on(tmp_path):
    task = load_tasks(write_tasks(tmp_path))[NAVIGATE_TASK]
    journals = tmp_path / "journal"
    first = SessionStore(RunSettings(journal_dir=journals)).start("again", task)
    first.append(_page("/one"))
    first.append(_page("/two"))
    original = find_journal(journals, "again", NAVIGATE_TASK)
    resumed = SessionStore(RunSettings(journal_dir=journals)).start(
        "again", task, started=journal_started(original)
    )
    resumed.resume(list(read_journal(original)))
    resumed.append(_page("/three"))
    newest = find_journal(journals, "again", NAVIGATE_TASK)
    assert newest != original and journal_started(newest) > journal_started(original)
    assert [event.url for event in load_trace(newest)] == [f"{SHOP}/one", f"{SHOP}/two", f"{SHOP}/three"]
    assert [event.url for event in resumed.trace] == [f"{SHOP}/one", f"{SHOP}/two", f"{SHOP}/three"]
    assert not [path for path in journals.iterdir() if path.name.endswith(".tmp")]


def test_journal_that_cannot_be_written_does_not_break_capture(tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the journal directory should be")
    journal = Journal(blocker / "x.jsonl")
    journal.write(_page("/a"))
    journal.write(_page("/b"))
    assert journal.lines == 0


def test_journal_filename_is_filesystem_safe():
    when = datetime(2026, 1, 2, 3, 4, 5, 600, tzinfo=UTC)
    assert journal_filename("alice", 7, when) == "alice-7-20260102T030405.000600.jsonl"
    assert journal_filename("../x y", None, when) == "_x_y-idle-20260102T030405.000600.jsonl"


def test_session_name_rules():
    assert session_name_problem("agent-1@run.2") is None
    assert session_name_problem("a/b") is None  # addressable as a%2Fb in control paths
    assert session_name_problem("") is not None
    assert session_name_problem("x" * 129) is not None
    assert session_name_problem("bad\nname") is not None


def test_idle_sessions_do_not_grow_without_bound(tmp_path, monkeypatch):
    monkeypatch.setattr(sessions_module, "IDLE_TRACE_LIMIT", 3)
    session = SessionStore(RunSettings(journal_dir=tmp_path)).get_or_create("browsing")
    for n in range(7):
        session.append(_page(f"/{n}"))
    assert [event.url for event in session.trace] == [f"{SHOP}/6"]
    assert session.describe()["dropped_idle_events"] == 6
    journal = session.attempt.journal
    assert journal is not None and journal.lines == 7  # the journal keeps everything


def test_a_new_session_starts_and_only_a_session_that_had_something_restarts(tmp_path):
    """`session` at every start; `reset` (a restart: what watchers showed is replaced) only before the
    start of a session that had a task or events."""
    tasks = load_tasks(write_tasks(tmp_path))
    store = SessionStore()
    heard: list[tuple[str, str]] = []
    store.notices.subscribe(lambda subject, kind, payload: heard.append((subject.name, kind)))
    store.start("new", tasks[NAVIGATE_TASK])
    assert heard == [("new", NoticeKind.STARTED)] and NoticeKind.STARTED == "session"
    store.start("new", tasks[NAVIGATE_TASK])  # its first task is replaced, though it has no events
    assert heard[1:] == [("new", "restarted"), ("new", "session")]
    store.get_or_create("idle").append(_page("/before"))  # idle traffic first: its trace is replaced
    store.start("idle", tasks[NAVIGATE_TASK])
    assert heard[3:] == [("idle", NoticeKind.EVENT), ("idle", NoticeKind.RESTARTED), ("idle", "session")]
    assert json.dumps({"kind": NoticeKind.RESTARTED}) == '{"kind": "restarted"}'  # says what it is


def test_a_role_has_one_subscriber_the_last(tmp_path):
    """A rebuilt control context takes the place of the last one's subscriber (`role`)."""
    task = load_tasks(write_tasks(tmp_path))[NAVIGATE_TASK]
    store = SessionStore()
    heard: list[str] = []
    store.notices.subscribe(lambda subject, kind, payload: heard.append(f"first {kind}"), role="ends")
    store.notices.subscribe(lambda subject, kind, payload: heard.append(f"second {kind}"), role="ends")
    store.notices.subscribe(lambda subject, kind, payload: heard.append(f"other {kind}"))
    store.start("s", task)
    store.get_or_create("s").append(_page("/x"))  # an event is no notice a role hears
    assert heard == ["other session", "second session", "other event"]
    assert store.notices.count() == 1  # a role is no watcher
