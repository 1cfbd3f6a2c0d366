"""A verdict on failing sites says so (`site_errors`): a real `webarena-live serve` in front of a real site
that answers 500 under `/broken/`; the finish, its preview, the session, `attempt.json` and the report
carry it, and the rewards mask such a verdict unless asked for the plain score (`verify
--keep-site-errors`)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.site_sessions import read, run_session, serve, site
from webarena_live.evaluator import report_run, url_origin
from webarena_live.rewards import score
from webarena_live.rewards.reward import judged, site_failure

__all__ = ["site"]

CLI = Path(sys.executable).with_name("webarena-live")


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory, site: str) -> Iterator[dict[str, Any]]:
    """Two sessions through one serve, one of them seeing two 500s: (served, their runs)."""
    workdir = tmp_path_factory.mktemp("site-errors")
    served = serve(workdir / "serve", site)
    try:
        hurt = run_session(served, "hurt", site, ["/a", "/broken/1", "/broken/2", "/b"])
        fine = run_session(served, "fine", site, ["/a", "/b"])
        yield {
            "served": served,
            "hurt": hurt,
            "fine": fine,
            "out": workdir / "serve" / "out",
            "work": workdir,
        }
    finally:
        served.stop()


def test_a_finish_on_failing_sites_carries_them_beside_the_verdict(ran: dict[str, Any], site: str) -> None:
    hurt = ran["hurt"]
    assert hurt["seen"] == ["200", "500", "500", "200"]
    expected = {
        "count": 2,
        "origins": {url_origin(site): 2},
        "first": [
            {"method": "GET", "url": f"{site}/broken/1", "status": 500},
            {"method": "GET", "url": f"{site}/broken/2", "status": 500},
        ],
    }
    # the finish (its preview answered the same: `finish` checks it), the session, attempt.json
    assert hurt["answer"]["site_errors"] == expected and hurt["answer"]["sites_answered"] is True
    assert hurt["after"]["site_errors"] == expected
    assert read(hurt["folder"], "attempt.json")["site_errors"] == expected
    assert "site_errors" not in read(hurt["folder"], "eval_result.json")  # the verdict is the reference's
    fine = ran["fine"]
    assert fine["answer"]["site_errors"] == {"count": 0, "origins": {}, "first": []}


def test_the_report_counts_such_verdicts_per_site_and_replica(ran: dict[str, Any], site: str) -> None:
    hurt = report_run(ran["out"] / "hurt").to_dict()["site_errors"]
    assert hurt == {
        "verdicts": 1,
        "task_ids": [1001],
        "folders": ["1001"],
        "by_replica": {f"__SHOPPING__ {url_origin(site)}": {"verdicts": 1, "failing_answers": 2}},
    }
    assert report_run(ran["out"] / "fine").to_dict()["site_errors"]["verdicts"] == 0
    shown = subprocess.run(
        [str(CLI), "report", str(ran["out"] / "hurt"), "--json"], capture_output=True, text=True, timeout=120
    )
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["site_errors"] == hurt
    table = subprocess.run(
        [str(CLI), "report", str(ran["out"] / "hurt")], capture_output=True, text=True, timeout=120
    )
    line = "verdicts on failing sites (500, 502-504, no answer): 1, by replica: "
    line += f"__SHOPPING__ {url_origin(site)} 1 (2 failing answers)"
    assert line in table.stdout, table.stdout


def test_rewards_mask_a_verdict_on_failing_sites_unless_asked_not_to(ran: dict[str, Any], site: str) -> None:
    control = ran["served"].control
    masked = score("hurt", control=control)
    assert masked.masked and masked.kind == "site_errors" and masked.value == 0.0
    assert (
        masked.reason
        == f"the task's sites failed 2 judged request(s), the first GET {site}/broken/1: status 500"
    )
    plain = score("hurt", control=control, mask_site_errors=False)
    assert not plain.masked and plain.value == 0.0 and plain.result == masked.result
    assert not score("fine", control=control).masked
    out = ran["work"] / "verify"
    verify = [str(CLI), "verify", "--session", "hurt", "--control", control, "--out", str(out)]
    refused = subprocess.run(verify, capture_output=True, text=True, timeout=120)
    assert refused.returncode == 1 and "site_errors" in refused.stderr and not (out / "reward.txt").exists()
    kept = subprocess.run([*verify, "--keep-site-errors"], capture_output=True, text=True, timeout=120)
    assert kept.returncode == 0, kept.stderr
    assert (out / "reward.txt").read_text() == "0\n"


def test_the_rule_on_its_own() -> None:
    result = {"status": "success", "score": 1.0, "sites_answered": True}
    assert site_failure(result) is None and not judged("s", result).masked
    failed = {**result, "site_errors": {"count": 1, "first": [{"method": "POST", "url": "u", "status": 0,
                                                                "error": "connection refused"}]}}  # fmt: skip
    assert (
        site_failure(failed)
        == "the task's sites failed 1 judged request(s), the first POST u: connection refused"
    )
    assert (
        judged("s", failed).kind == "site_errors" and judged("s", failed).value == 1.0
    )  # masked, score kept
    assert judged("s", failed, mask_site_errors=False).masked is False
    assert site_failure({**result, "site_errors": {"count": 0, "first": []}}) is None
    assert site_failure({**result, "site_errors": "garbled"}) is None
