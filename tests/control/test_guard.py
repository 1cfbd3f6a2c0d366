"""The control API's guards on their own: which requests a page could have made, and the token check;
and the journal lookup a resume relies on."""

from __future__ import annotations

import pytest

from tests.support.addon_helpers import MUTATE_TASK, NAVIGATE_TASK, SHOP, make_flow, write_tasks
from webarena_live.control.guard import page_request_problem, token_problem
from webarena_live.evaluator.tasks import load_tasks
from webarena_live.proxy.capture import event_from_flow
from webarena_live.runs.recovery import JournalNotFoundError, find_journal, read_journal
from webarena_live.runs.sessions import SessionStore
from webarena_live.runs.settings import RunSettings


@pytest.mark.parametrize(
    ("method", "headers", "refused"),
    [
        ("POST", {}, False),  # requests, curl
        ("POST", {"sec-fetch-mode": "cors"}, False),  # Node's fetch marks the mode only
        ("GET", {"sec-fetch-site": "none", "sec-fetch-mode": "navigate"}, False),  # the address bar
        (
            "GET",
            {"sec-fetch-site": "cross-site", "sec-fetch-mode": "no-cors", "sec-fetch-dest": "image"},
            True,
        ),
        ("POST", {"sec-fetch-dest": "empty", "sec-fetch-mode": "no-cors"}, True),
        ("POST", {"sec-fetch-site": "none", "sec-fetch-mode": "cors"}, True),
        ("GET", {"referer": "http://shop.test/p"}, True),
        ("POST", {"origin": "http://shop.test"}, True),
        # The dashboard (a page of the control API's own origin) reads, and only reads.
        (
            "GET",
            {"sec-fetch-site": "same-origin", "sec-fetch-mode": "cors", "referer": "http://127.0.0.1:8081/"},
            False,
        ),
        (
            "POST",
            {"sec-fetch-site": "same-origin", "sec-fetch-mode": "cors", "origin": "http://127.0.0.1:8081"},
            True,
        ),
        ("GET", {"sec-fetch-site": "same-site", "sec-fetch-mode": "cors"}, True),
    ],
)
def test_page_request_problem(method, headers, refused):
    assert (page_request_problem(method, headers) is not None) is refused


def test_token_problem():
    assert token_problem(None, None) is None and token_problem("", "Bearer x") is None
    assert token_problem("t", "Bearer t") is None and token_problem("t", "  BEARER   t ") is None
    assert token_problem("t", None) and token_problem("t", "Bearer u") and token_problem("t", "Basic t")


def test_journal_lookup_does_not_confuse_similar_session_names(tmp_path):
    store = SessionStore(RunSettings(journal_dir=tmp_path))
    tasks = load_tasks(write_tasks(tmp_path))
    for name in ("a", "a-9001", "a b"):
        store.start(name, tasks[NAVIGATE_TASK]).append(
            event_from_flow(make_flow(url=f"{SHOP}/{name.replace(' ', '_')}"))
        )
    assert [event.url for event in read_journal(find_journal(tmp_path, "a", NAVIGATE_TASK))] == [f"{SHOP}/a"]
    found = find_journal(tmp_path, "a-9001", NAVIGATE_TASK)
    assert [event.url for event in read_journal(found)] == [f"{SHOP}/a-9001"]
    with pytest.raises(JournalNotFoundError):
        find_journal(tmp_path, "a", MUTATE_TASK)
