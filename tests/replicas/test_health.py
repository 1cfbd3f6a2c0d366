"""A copy's health from its answers (`replicas/health.py`), its probe pauses, and the site map keys that
set it (`health`, `health_url`), with the line each mistyped value gets."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webarena_live.evaluator.errors import SiteConfigError
from webarena_live.evaluator.site_answers import answer_failed
from webarena_live.evaluator.site_checks import config_problems
from webarena_live.evaluator.site_environment import SiteHealth
from webarena_live.evaluator.sites import SiteMap
from webarena_live.replicas.health import PROBE_PAUSE, ReplicaHealth, probe_pause


def test_failing_answers_are_no_connection_a_timeout_500_and_502_to_504() -> None:
    for status in (500, 502, 503, 504):
        assert answer_failed(status)
    assert answer_failed(0, "connection refused") and answer_failed(None, "timed out") and answer_failed(0)
    for status in (200, 201, 302, 304, 400, 401, 403, 404, 409, 422, 501, 505):
        assert not answer_failed(status), status


def test_a_copy_is_failing_once_its_recent_answers_are_mostly_failures() -> None:
    health = ReplicaHealth(SiteHealth(window=4, threshold=0.5, min_answers=3))
    assert health.record(500) is False  # one answer is not enough to judge by
    assert health.record(502) is False
    assert health.record(200) is True  # two failures of three
    assert health.view() == {
        "failing": True,
        "recent_answers": 3,
        "recent_failures": 2,
        "answers": 3,
        "failures": 2,
    }
    for _ in range(3):
        health.record(200)
    assert not health.failing  # the failures left the window of four
    assert health.recent_failures == 0 and health.failures == 2


def test_a_healthy_copy_with_the_odd_error_stays_in_service() -> None:
    health = ReplicaHealth()  # the defaults: window 10, threshold 0.5, min_answers 3
    for status in [200, 200, 500, 200, 404, 200, 503, 200, 200, 200, 200, 0]:
        health.record(status, "timed out" if status == 0 else None)
    assert not health.failing and health.recent_failures == 3  # of the last ten


def test_clear_forgets_the_window_but_not_the_totals() -> None:
    health = ReplicaHealth(SiteHealth(window=3, threshold=1.0, min_answers=1))
    assert health.record(0, "connection refused")
    health.clear()
    assert not health.failing and health.view()["recent_answers"] == 0
    assert health.answers == 1 and health.failures == 1
    assert not health.record(200)


@given(
    answers=st.lists(st.booleans(), max_size=60),
    window=st.integers(1, 12),
    threshold=st.floats(0.05, 1.0),
    data=st.data(),
)
def test_failing_is_the_share_of_failures_in_the_last_window_or_a_run_of_failures(
    answers: list[bool], window: int, threshold: float, data: st.DataObject
) -> None:
    min_answers = data.draw(st.integers(1, window))
    health = ReplicaHealth(SiteHealth(window=window, threshold=threshold, min_answers=min_answers))
    for failed in answers:
        health.record_outcome(failed=failed)
    recent = answers[-window:] if answers else []
    streak = len(recent) >= min_answers and all(recent[-min_answers:])  # a copy that just broke
    expected = len(recent) >= min_answers and (streak or sum(recent) >= threshold * len(recent))
    assert health.failing == expected
    assert health.answers == len(answers) and health.failures == sum(answers)
    # The same answers given as statuses classify the same way.
    again = ReplicaHealth(health.settings)
    for failed in answers:
        again.record(503 if failed else 200)
    assert again.failing == expected


def test_probe_pauses_double_from_the_first_and_stop_at_the_cap() -> None:
    assert [probe_pause(n) for n in range(7)] == [2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0]
    assert probe_pause(10_000) == PROBE_PAUSE[1]
    assert probe_pause(0, first=0.5, cap=1.0) == 0.5 and probe_pause(3, first=0.5, cap=1.0) == 1.0
    with pytest.raises(ValueError, match="attempt must be 0 or more"):
        probe_pause(-1)
    with pytest.raises(ValueError, match="need 0 < first <= cap"):
        probe_pause(0, first=5.0, cap=1.0)


@given(st.integers(0, 200), st.floats(0.01, 10.0), st.floats(10.0, 600.0))
def test_probe_pauses_never_shrink_and_never_pass_the_cap(attempt: int, first: float, cap: float) -> None:
    pause = probe_pause(attempt, first=first, cap=cap)
    assert first <= pause <= cap
    assert probe_pause(attempt + 1, first=first, cap=cap) >= pause


def site(**entry: object) -> dict[str, object]:
    return {"environments": {"__GITLAB__": entry}}


def test_the_site_map_carries_health_and_each_replica_its_probe_url() -> None:
    config = site(
        replicas=[
            {"urls": ["http://127.0.0.1:8023/sub"], "health_url": "/-/readiness"},
            {"urls": ["http://127.0.0.1:8024"], "health_url": "http://127.0.0.1:9000/up"},
            {"urls": ["http://127.0.0.1:8025/"]},
        ],
        health={"window": 4, "threshold": 0.75, "min_answers": 2},
    )
    assert config_problems(config) == []
    site_map = SiteMap.from_config(config, source="config.json")
    assert site_map.environments["gitlab"].health == SiteHealth(window=4, threshold=0.75, min_answers=2)
    assert [r.probe_url for r in site_map.replicas("gitlab")] == [
        "http://127.0.0.1:8023/-/readiness",
        "http://127.0.0.1:9000/up",
        "http://127.0.0.1:8025/",  # no health_url: the start URL
    ]
    plain = SiteMap.from_config(site(urls=["http://127.0.0.1:8023"], health_url="/up"), source="c")
    assert plain.replicas("gitlab")[0].probe_url == "http://127.0.0.1:8023/up"
    assert plain.environments["gitlab"].health == SiteHealth()  # the defaults


@pytest.mark.parametrize(
    ("entry", "line"),
    [
        ({"health": {"window": 0}}, "environments.__GITLAB__.health.window: must be a whole number"),
        (
            {"health": {"window": "ten"}},
            "health.window: must be a whole number of answers, at least 1 (default 10), not 'ten'",
        ),
        ({"health": {"threshold": 1.5}}, "health.threshold: must be the share of failures"),
        ({"health": {"threshold": 0}}, "above 0 and at most 1 (default 0.5), not 0"),
        ({"health": {"min_answers": -1}}, "health.min_answers: must be a whole number"),
        (
            {"health": {"windw": 3}},
            "environments.__GITLAB__.health: unknown key 'windw' (did you mean 'window'?)",
        ),
        ({"health": {"window": 2, "min_answers": 5}}, "health: min_answers (5) is more than window (2)"),
        ({"health": 10}, 'health: must be an object such as {"window": 10'),
        ({"health_url": "readiness"}, "health_url: 'readiness' is neither a path (such as '/-/readiness')"),
    ],
)
def test_mistyped_health_values_are_named_one_line_each(entry: dict[str, object], line: str) -> None:
    problems = config_problems(site(urls=["http://127.0.0.1:8023"], **entry))
    assert len(problems) == 1 and line in problems[0], problems


def test_mistyped_replica_health_urls_are_named_with_their_replica() -> None:
    replicas = [
        {"urls": ["http://127.0.0.1:8023"]},
        {"urls": ["http://127.0.0.1:8024"], "health_url": "ftp://x"},
    ]
    assert config_problems(site(replicas=replicas)) == [
        "environments.__GITLAB__.replicas[1].health_url: 'ftp://x' is neither a path (such as "
        "'/-/readiness') nor an http(s) URL with a host"
    ]
    assert config_problems(site(replicas=[{"urls": ["http://h"], "helth_url": "/x"}])) == [
        "environments.__GITLAB__.replicas[0]: unknown key 'helth_url' (did you mean 'health_url'?)"
    ]
    one_for_all = config_problems(site(replicas=replicas[:1], health_url="/up"))
    assert (
        one_for_all and 'give either "urls" (and "reset_url", "health_url") or "replicas"' in one_for_all[0]
    )


def test_a_lenient_map_still_refuses_a_health_it_cannot_use() -> None:
    with pytest.raises(SiteConfigError, match=r"health\.window"):
        SiteMap.from_config(
            site(urls=["http://h"], health={"window": 0}), source="run_config.json", strict=False
        )
