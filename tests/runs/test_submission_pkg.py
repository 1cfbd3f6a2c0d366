"""The reference's `create-submission-pkg` takes a run directory written by `webarena-live serve`, unchanged.

A real proxy runs official tasks (their sites mapped to the demo shop on
127.0.0.1), once in the default layout (`OUT/<task_id>/`, with an earlier
attempt moved to `OUT/.attempts/`) and once in a named run
(`OUT/attempt-2/<task_id>/`); then the reference packages both directories.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import requests

from tests.support.serve_process import finish, launch_serve, shop
from webarena_live.evaluator.site_checks import KNOWN_SITES, placeholder

__all__ = ["shop"]

TASKS = (21, 22, 23)
"""Official shopping tasks: which answers they get does not matter to packaging."""
ANSWER = {"task_type": "retrieve", "status": "SUCCESS", "retrieved_data": ["a"]}


def test_create_submission_pkg_accepts_the_proxys_run_directories(
    tmp_path: Path, shop: str, official_dataset: Path, oracle_python: Path
) -> None:
    config = {"environments": {placeholder(site): {"urls": [shop]} for site in KNOWN_SITES}}
    (tmp_path / "config.json").write_text(json.dumps(config))
    serve = launch_serve(tmp_path, "--tasks", str(official_dataset), "--config", "config.json",
                         "--output-dir", "out", "--set", "confdir=conf", "--quiet")  # fmt: skip
    control, port = serve.control, serve.proxy_port

    def attempt(task_id: int, run: str | None) -> None:
        body = {
            "task_id": task_id,
            "session": f"s{task_id}",
            "restart": True,
            **({"run": run} if run else {}),
        }
        requests.post(f"{control}/sessions", json=body, timeout=10).raise_for_status()
        proxies = {"http": f"http://s{task_id}:x@127.0.0.1:{port}"}
        requests.get(
            f"{shop}/", proxies=proxies, headers={"Accept": "text/html"}, timeout=10
        ).raise_for_status()
        finish(control, f"s{task_id}", ANSWER).raise_for_status()

    try:
        for task_id in TASKS:
            attempt(task_id, None)
            attempt(task_id, "attempt-2")
        attempt(TASKS[0], None)  # a second attempt: the first moves to out/.attempts/
    finally:
        serve.stop()
    out = tmp_path / "out"
    assert (out / ".attempts" / str(TASKS[0]) / "1" / "eval_result.json").is_file()
    tool = oracle_python.parent / "webarena-verified"
    for name, run_dir in (("default", out), ("named", out / "attempt-2")):
        done = subprocess.run(
            [str(tool), "create-submission-pkg", "--run-output-dir", str(run_dir), "--output",
             str(tmp_path / "submissions"), "--no-tar", "--name", name],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        summary = json.loads(next((tmp_path / "submissions").glob(f"*{name}*/summary.json")).read_text())
        assert summary["packaged_tasks"]["task_ids"] == list(TASKS), summary["packaging_summary"]
        assert summary["packaging_summary"]["tasks_with_issues"] == 0
        assert (
            summary["packaging_summary"]["unknown_tasks"]
            == summary["packaging_summary"]["duplicate_tasks"]
            == 0
        )
        issues = summary["issues"]["missing_files"]
        assert all(category["count"] == 0 for category in issues.values()), issues
