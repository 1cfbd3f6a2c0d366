"""A session that captured nothing says what the proxy did see of it (`runs/uncaptured.py`): nothing at
all, only the browser's own service traffic, or requests to hosts outside the site map; and what to do
(abandon, then finish). The same words in the finish's `no_events`, the preview's and the session's view."""

from __future__ import annotations

import pytest

from tests.support.addon_helpers import NAVIGATE_TASK, browser_headers, make_flow, write_tasks
from webarena_live.evaluator import SiteMap, load_tasks
from webarena_live.proxy.capture import event_from_flow
from webarena_live.runs.finish_outcome import FinishRefused
from webarena_live.runs.sessions import SessionStore
from webarena_live.runs.settings import RunSettings
from webarena_live.runs.uncaptured import UNMAPPED_LISTED, Unmapped, is_loopback

NAVIGATE_DONE = {"task_type": "NAVIGATE", "status": "SUCCESS", "retrieved_data": None}
LOOPBACK_SHOP = "http://127.0.0.1:7770"
ABANDON = "abandon it (POST /sessions/agent%207/abandon) and then finish it (POST /sessions/agent%207/finish)"


@pytest.fixture
def store(tmp_path) -> SessionStore:
    site_map = SiteMap.from_dict({"environments": {"__SHOPPING__": {"urls": [LOOPBACK_SHOP]}}})
    return SessionStore(RunSettings(site_map, journal_dir=tmp_path / "journal"))


@pytest.fixture
def tasks(tmp_path):
    return load_tasks(write_tasks(tmp_path))


def refusal(session) -> str:
    with pytest.raises(FinishRefused) as refused:
        session.finish(NAVIGATE_DONE)
    assert refused.value.reason == "no_events"
    with pytest.raises(FinishRefused) as previewed:
        session.attempt.preview(NAVIGATE_DONE)
    assert previewed.value.detail == refused.value.detail  # the preview says what the finish says
    assert session.describe()["nothing_captured"] == refused.value.detail  # and the dashboard's view
    return refused.value.detail


def test_nothing_at_all_names_the_sites_and_chromiums_loopback_rule(store, tasks):
    said = refusal(store.start("agent 7", tasks[NAVIGATE_TASK]))
    assert "no events captured in session 'agent 7': the proxy saw no request of it at all" in said
    assert "The task's sites: 127.0.0.1:7770." in said
    assert "unless `<-loopback>` is in its proxy bypass list" in said
    assert "--proxy-bypass-list=<-loopback>" in said
    assert ABANDON in said and "frees its address" in said


def test_only_service_traffic_says_the_browser_went_around_the_proxy(store, tasks):
    session = store.start("agent 7", tasks[NAVIGATE_TASK])
    session.attempt.note_browser_request("POST", "http://update.googleapis.com/service/update2/json")
    session.attempt.note_browser_request("CONNECT", "accounts.google.com:443")
    said = refusal(session)
    assert (
        "the proxy saw only 2 requests of the browser's own services (update.googleapis.com, "
        "accounts.google.com), none to the task's sites (127.0.0.1:7770): the browser uses the proxy but "
        "sent the sites' requests around it." in said
    )
    assert 'bypass="<-loopback>"' in said and ABANDON in said


def test_requests_outside_the_site_map_are_named(store, tasks):
    session = store.start("agent 7", tasks[NAVIGATE_TASK])
    session.attempt.unmapped.note("shop.example:443")
    session.attempt.unmapped.note("shop.example:443")
    said = refusal(session)
    outside = "the proxy saw 2 requests to hosts that are no site of the site map (shop.example:443)"
    assert f": {outside}, none to the task's sites (127.0.0.1:7770)" in said
    assert "<-loopback>" not in said and ABANDON in said


def test_a_site_on_a_host_name_gets_no_loopback_advice(tmp_path, tasks):
    site_map = SiteMap.from_dict({"environments": {"__SHOPPING__": {"urls": ["http://shop.internal:80"]}}})
    store = SessionStore(RunSettings(site_map, journal_dir=tmp_path / "journal"))
    said = refusal(store.start("a", tasks[NAVIGATE_TASK]))
    assert "shop.internal:80" in said and "<-loopback>" not in said


def test_a_session_with_events_or_finished_shows_no_such_words(store, tasks):
    session = store.start("a", tasks[NAVIGATE_TASK])
    assert "nothing_captured" in session.describe()
    page = make_flow(url=f"{LOOPBACK_SHOP}/products/7", headers=browser_headers(navigate=True))
    session.append(event_from_flow(page))
    assert "nothing_captured" not in session.describe()
    session.finish(NAVIGATE_DONE)
    assert "nothing_captured" not in session.describe()
    assert "nothing_captured" not in store.get_or_create("idle").describe()  # no task: nothing to finish


def test_the_hosts_kept_are_bounded_and_loopback_is_chromiums():
    unmapped = Unmapped()
    for index in range(UNMAPPED_LISTED + 5):
        unmapped.note(f"host-{index}:443")
    unmapped.note("host-0:443")
    assert unmapped.count == UNMAPPED_LISTED + 6 and len(unmapped.hosts) == UNMAPPED_LISTED
    assert unmapped.hosts["host-0:443"] == 2
    assert all(map(is_loopback, ["127.0.0.1", "127.8.9.1", "localhost", "app.localhost", "[::1]", "::1"]))
    assert not any(map(is_loopback, ["10.0.0.1", "shop.internal", "localhost.example"]))
