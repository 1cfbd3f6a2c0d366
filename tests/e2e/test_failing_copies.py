"""A copy that fails is noticed, kept from new sessions, reset, and named in every verdict it touched.

Two replicas of a real counter site (`tests/support/counter_replicas.py`) with real reset endpoints,
`serve --isolation readers` (readers pack onto the least busy, lowest copy), six reading sessions one
after the other, each a browser-like navigation through its own proxy address and a finish. The copy the
first session leases fails before anyone sends a thing: it answers 500 to everything, or its site is
gone (connections refused: the proxy answers 502). With the site map's `health` defaults (of the last 10
judged answers, at least 2 and half of them failures) the pool calls it failing at its second failure:
at most two sessions land on it, nobody changed it yet it is reset (its endpoint called) and probed,
`/health` names it, every finish that ran on it carries `site_errors`, and the healthy copy takes the
rest. A reset that repairs it puts it back in service (probed at its `health_url`, a later session lands
on it); one that does not leaves it `out_of_service` with the reason, retried with a growing pause.
In one process, with `--workers 2` (the front gathers the workers' answers) and on two Ray nodes.
"""

from __future__ import annotations

import contextlib
import itertools
import signal
from pathlib import Path

import pytest

from tests.support.failing_copies import (
    FAILURES,
    Run,
    answer_500,
    check_taken_out,
    copy_view,
    health,
    navigate_and_finish,
    one_session,
    pool_notices,
    ray_cluster,
    serve,
    six_readers,
    timed,
    two_counters,
)
from tests.support.serve_process import wait_until

pytestmark = pytest.mark.timeout(300)


@pytest.mark.parametrize("how", list(FAILURES))
def test_a_failing_copy_takes_at_most_two_sessions_and_is_reset(tmp_path: Path, how: str) -> None:
    """In one process: a copy that answers 500 to everything, or whose site is gone."""
    fail, answered = FAILURES[how]
    with two_counters(tmp_path) as (replicas, config):
        proxy = serve(tmp_path / "serve", config)
        try:
            with pool_notices(proxy) as notices:
                run = six_readers(proxy, replicas, fail)
                view = check_taken_out(proxy, replicas, run, answered)
        finally:
            proxy.stop()
    expected = "HTTP 500" if how == "answers 500" else "ConnectError"
    assert expected in view["reason"], view
    # its holder at its second failure was told, on the event stream, that the copy it holds is failing
    told = [n for n in notices if n.get("state") == "failing" and n.get("index") == run.broken]
    assert told and told[0].get("session") == run.sessions[1].name and told[0]["failing"], notices


@pytest.mark.parametrize("mode", ["two workers", "ray"])
def test_a_copy_answering_500_under_a_fleet(tmp_path: Path, mode: str) -> None:
    """`--workers 2` (local), and `--workers 2 --ray` on two Ray nodes on 127.0.0.1 with the sessions
    asking for a worker near each node in turn: the front gathers the failures each worker saw."""
    with contextlib.ExitStack() as stack:
        replicas, config = stack.enter_context(two_counters(tmp_path))
        more: tuple[str, ...] = ("--workers", "2")
        if mode == "ray":
            more = (*more, "--ray", stack.enter_context(ray_cluster()))
        proxy = serve(tmp_path / "serve", config, *more, timeout=180)
        stack.callback(proxy.stop)
        nodes = sorted({w["node"] for w in health(proxy)["workers"]}) if mode == "ray" else None
        run = six_readers(proxy, replicas, answer_500, nodes=nodes)
        check_taken_out(proxy, replicas, run, 500)
    if mode == "ray":
        assert nodes is not None and len(nodes) == 2
        assert {s.node for s in run.sessions[:2]} == set(nodes)  # its failures seen on both nodes


@pytest.mark.parametrize("mode", ["one process", "two workers"])
@pytest.mark.parametrize("how", list(FAILURES))
def test_a_copy_its_reset_repairs_serves_again(tmp_path: Path, how: str, mode: str) -> None:
    """The reset endpoint repairs it (a restarted container): its `health_url` answers 2xx, it is
    `free` again, and the next session lands on it and is served; with `--workers 2` the front's pool
    does the same on the failures its workers saw."""
    fail, answered = FAILURES[how]

    def back_before_the_next(run: Run) -> None:
        if len(run.sessions) == 2:  # its second failure: failing, reset, probed, back
            wait_until("the repaired copy free", lambda: copy_view(proxy, run.broken)["state"] == "free")

    with two_counters(tmp_path, health_url="/healthz") as (replicas, config):
        for replica in replicas:
            replica.repairs_on_reset(True)
        proxy = serve(tmp_path / "serve", config, *(("--workers", "2") if mode == "two workers" else ()))
        try:
            run = six_readers(proxy, replicas, fail, between=back_before_the_next)
            view = copy_view(proxy, run.broken)
        finally:
            proxy.stop()
        broken = replicas[run.broken]
        assert broken.reset.done == 1 and broken.site.posts == 0 and replicas[1 - run.broken].reset.calls == 0
    first, later = run.sessions[:2], run.sessions[2:]
    assert [s.replica for s in first] == [run.broken] * 2 and [s.status for s in first] == [answered] * 2
    assert all(s.finish["site_errors"]["count"] > 0 for s in first), [s.finish for s in first]
    assert later[0].replica == run.broken, [(s.name, s.replica) for s in run.sessions]  # it serves again
    assert all(s.status == 200 and s.finish["site_errors"]["count"] == 0 for s in later), later
    assert run.views[1]["state"] in {"failing", "resetting", "free"}, run.views  # taken out, then back
    assert view["state"] in {"free", "leased"} and "failing" not in view and "reason" not in view, view
    assert [(r["ok"], r["why"].startswith("failing: ")) for r in view["resets"]] == [(True, True)], view
    assert view["health"]["failures"] == 2 and view["health"]["recent_failures"] == 0, view


def test_a_copy_its_reset_does_not_repair_stays_out_of_service(tmp_path: Path) -> None:
    """The reset succeeds but the copy still answers 500: out of service with the reason, retried with
    a growing pause (each retry resets and probes again), and the other copy takes every later session."""
    called: list[float] = []
    with two_counters(tmp_path) as (replicas, config):
        for replica in replicas:
            replica.repairs_on_reset(False)
            replica.reset.on_reset = timed(replica.reset.on_reset, called)
        proxy = serve(tmp_path / "serve", config)
        try:
            run = six_readers(proxy, replicas, answer_500)
            view = check_taken_out(proxy, replicas, run, 500)
            wait_until("three resets of the failing copy", lambda: len(called) >= 3)
            # between a retry's reset and its probe it shows `resetting`; then out of service again
            again = wait_until(
                "out of service after the third reset",
                lambda: (v := copy_view(proxy, run.broken))["state"] == "out_of_service" and v,
            )
        finally:
            proxy.stop()
    assert len(run.on(run.broken)) == 2  # the defaults: failing at the second failure
    assert "HTTP 500" in view["reason"] and again["state"] == "out_of_service", again
    assert replicas[run.broken].site.broken  # nothing repaired it
    pauses = [b - a for a, b in itertools.pairwise(called)]
    assert pauses[1] > 1.5 * pauses[0], pauses  # the pause grows (doubling)
    assert len(again["resets"]) >= 3 and all(r["ok"] for r in again["resets"]), again


def test_a_copy_failing_when_serve_is_killed_is_probed_before_its_next_lease(tmp_path: Path) -> None:
    """SIGKILL while the failing copy is out of service; the next `serve` on the same output directory
    remembers it failing: it resets and probes it before any lease, and it stays out while it fails."""
    with two_counters(tmp_path) as (replicas, config):
        first = serve(tmp_path / "serve", config)
        try:
            run = six_readers(first, replicas, answer_500)
            check_taken_out(first, replicas, run, 500)
            assert first.process is not None
            first.process.send_signal(signal.SIGKILL)
            first.process.wait(timeout=60)
        finally:
            first.stop()
        broken = replicas[run.broken]
        calls = broken.reset.calls
        second = serve(tmp_path / "serve", config)
        try:
            started, index = one_session(second, replicas, "after-restart")
            status, finish = navigate_and_finish(second, started, replicas[index])
            view = wait_until(
                "out of service after the restart",
                lambda: (v := copy_view(second, run.broken))["state"] == "out_of_service" and v,
            )
        finally:
            second.stop()
    assert index == 1 - run.broken and status == 200 and finish["site_errors"]["count"] == 0, finish
    assert broken.reset.calls > calls and "HTTP 500" in view["reason"], view
    assert view["resets"][0]["why"].startswith("failing before a restart"), view
