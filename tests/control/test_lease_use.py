"""`GET /mutations` tells a front when each session last used its lease from the uses since its last ask
(`LeaseUse`, `active_after`), never by walking every session: what a finish over `--workers` costs
follows what changed, not how many sessions the worker ever had.

The real control app in-process (`tests/support/control_in_process.py`) over real sessions and leases.
"""

from __future__ import annotations

import time
from pathlib import Path

from tests.support.addon_helpers import NAVIGATE_TASK, write_tasks
from tests.support.control_in_process import call
from webarena_live.control.context import ControlContext
from webarena_live.evaluator.sites import SiteMap
from webarena_live.evaluator.tasks import load_tasks
from webarena_live.replicas import Lease, LeaseUse
from webarena_live.runs.sessions import SessionStore
from webarena_live.runs.settings import RunSettings

SHOP = "http://shop.test"


def _lease(name: str) -> Lease:
    return Lease({}, {}, session=name)


def test_uses_are_told_newest_first_since_a_moment_and_ended_leases_forgotten() -> None:
    use = LeaseUse()
    leases = {name: _lease(name) for name in ("a", "b", "c")}
    for name in ("a", "b", "c"):
        use.used(name, leases[name])
    assert set(use.since()) == {"a", "b", "c"}
    cut = time.time()
    time.sleep(0.01)
    use.used("a", leases["a"])  # used again: moved to the end, its time the newest
    assert use.since(cut) == {"a": leases["a"].touched} and leases["a"].touched >= cut
    leases["b"].copy_end("abandoned")
    assert set(use.since()) == {"a", "c"}  # an ended lease is no use to tell, and forgotten
    assert "b" not in use._leases
    # A session started again holds a new lease: the newest use is the one told.
    fresh = _lease("c")
    use.used("c", fresh)
    assert use.since(cut) == {"a": leases["a"].touched, "c": fresh.touched}


def test_mutations_answers_the_uses_since_the_fronts_last_ask(tmp_path: Path) -> None:
    tasks = load_tasks(write_tasks(tmp_path))
    site_map = SiteMap.from_dict({"environments": {"__SHOPPING__": {"urls": [SHOP]}}})
    settings = RunSettings(site_map, output_dir=tmp_path / "out", journal_dir=tmp_path / "journal")
    ctx = ControlContext(tasks=tasks, sessions=SessionStore(settings))
    for index in range(300):  # many sessions holding leases, most of them quiet
        name = f"s{index}"
        assert call(ctx, "POST", "/sessions", {"task_id": NAVIGATE_TASK, "session": name})[0] == 200
        ctx.sessions.get_or_create(name).attempt.lease = _lease(name)
    for index in range(300):  # each used once (a control call counts as use)
        assert call(ctx, "GET", f"/sessions/s{index}")[0] == 200
    status, first = call(ctx, "GET", "/mutations")
    assert status == 200 and len(first["active"]) == 300 and isinstance(first["now"], float)
    time.sleep(0.01)
    assert call(ctx, "GET", "/sessions/s7")[0] == 200
    status, second = call(ctx, "GET", f"/mutations?active_after={first['now']}")
    assert status == 200 and list(second["active"]) == ["s7"] and second["now"] > first["now"]
    lease = ctx.sessions.get_or_create("s7").attempt.lease
    assert lease is not None and second["active"]["s7"] == lease.touched
    status, third = call(ctx, "GET", f"/mutations?active_after={second['now']}")
    assert status == 200 and third["active"] == {}
    status, bad = call(ctx, "GET", "/mutations?active_after=soon")
    assert status == 400 or status == 422, bad
