"""The study recipe (examples/agentlab_study.py) on three demo-shop replicas under `--isolation readers`.

Run as the README has it (`python examples/agentlab_study.py ... --agent demo`, no AgentLab, no LLM, no
download): it exits 0, names its run and prints its run directory, and each episode's cum_reward is the
score in that run's eval_result.json. Run by BrowserGym's ExpArgs loop with the scripted agents, four
episodes at once: the two readers share a copy, each mutating task holds one alone, and the rewards in
the experiments' own results (summary_info.json) are the reference's verdicts on the HARs the proxy wrote.

AgentLab itself is not installed here (it brings torch, Ray, gradio and LLM clients: gigabytes for CI);
its Study runs these same EnvArgs and Benchmark through a copy of this loop (docs/guides/browsergym.md).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from browsergym.experiments.loop import ExpArgs

from tests.browsergym.agents import PLANS, ScriptedAgentArgs
from tests.site.harness import REPO, ProxyProcess, oracle_verdicts
from webarena_live.client import Client

sys.path.insert(0, str(REPO / "examples"))  # the recipe as a user has it; spawned workers inherit sys.path
from agentlab_study import live_benchmark, run_experiments

pytestmark = pytest.mark.timeout(400)

STUDY = ("navigate-right", "retrieve-wrong", "mutate-right", "wishlist-right")


def test_four_experiments_at_once_rewarded_with_the_verdicts(
    proxy: ProxyProcess, workdir: Path, oracle_python: Path, oracle_config: Path
) -> None:
    benchmark = live_benchmark(proxy.control_url, [PLANS[plan][0] for plan in STUDY], slow_mo=0, max_steps=10)
    names = [env_args.task_name for env_args in benchmark.env_args_list]
    assert "webarena" not in benchmark.name and not any(name.startswith("webarena") for name in names)
    experiments = []
    for plan, env_args in zip(STUDY, benchmark.env_args_list, strict=True):
        env_args.task_kwargs = {**env_args.task_kwargs, "session": f"study-{plan}", "run": f"study-{plan}"}
        experiments.append(ExpArgs(agent_args=ScriptedAgentArgs(plan=plan), env_args=env_args))
    folders = run_experiments(experiments, workdir / "study", n_jobs=4)

    with Client(proxy.control_url) as client:
        sessions = {plan: client.session(f"study-{plan}") for plan in STUDY}
    print("\n" + "\n".join(f"{plan}: {json.dumps(s.get('replicas'))}" for plan, s in sessions.items()))
    # All four ran at once: each started before any finished.
    assert max(s["started"] for s in sessions.values()) < min(s["finished"] for s in sessions.values())
    leased = {plan: json.dumps(s.get("replicas"), sort_keys=True) for plan, s in sessions.items()}
    assert leased["navigate-right"] == leased["retrieve-wrong"]  # readers share
    assert len(set(leased.values())) == 3  # each writer alone

    for plan, folder in zip(STUDY, folders, strict=True):
        summary = json.loads((folder / "summary_info.json").read_text())
        assert summary["err_msg"] is None, summary["stack_trace"]
        task_id = PLANS[plan][0]
        judged = workdir / "study-judged" / plan
        shutil.copytree(proxy.output_dir / f"study-{plan}" / str(task_id), judged / str(task_id))
        for stale in ("eval_result.json", "attempt.json"):
            (judged / str(task_id) / stale).unlink(missing_ok=True)
        reference = oracle_verdicts(oracle_python, judged, oracle_config)[task_id]["status"]
        print(f"{plan}: cum_reward {summary['cum_reward']}, reference {reference}, planned {PLANS[plan][2]}")
        assert summary["cum_reward"] == (1.0 if reference == "success" else 0.0)
        assert reference == PLANS[plan][2] and summary["terminated"]


def test_the_recipe_runs_as_written_with_the_demo_agent(proxy: ProxyProcess, workdir: Path) -> None:
    """The README's command, in a process of its own: three demo tasks, three jobs, the demo's agent."""
    # As a new user has it: no token variable, no tiktoken cache, no Playwright browsers folder (the
    # example finds the system's Chromium itself).
    unset = ("WEBARENA_LIVE_TOKEN", "TIKTOKEN_CACHE_DIR", "PLAYWRIGHT_BROWSERS_PATH")
    env = {k: v for k, v in os.environ.items() if k not in unset}
    command = [sys.executable, str(REPO / "examples" / "agentlab_study.py"), "--control", proxy.control_url,
               "--tasks", "1001,1003,1004", "--n-jobs", "3", "--agent", "demo"]  # fmt: skip
    (workdir / "recipe").mkdir()
    done = subprocess.run(
        command, cwd=workdir / "recipe", env=env, capture_output=True, text=True, timeout=300
    )
    print(done.stdout, done.stderr[-3000:])
    assert done.returncode == 0, done.stderr[-3000:]
    run = re.search(r"^run: (\S+)$", done.stdout, re.M)
    run_dir = re.search(r"^run directory: (.+)$", done.stdout, re.M)
    assert run and run_dir and run.group(1).startswith("wa_live-"), done.stdout
    assert Path(run_dir.group(1)) == proxy.output_dir / run.group(1)
    assert f"webarena-live report {run_dir.group(1)}" in done.stdout and "/dashboard/" in done.stdout
    rewards = {
        int(t): float(r)
        for t, r in re.findall(r"^wa_live\.(\d+) seed 0: cum_reward (\S+)$", done.stdout, re.M)
    }
    assert sorted(rewards) == [1001, 1003, 1004], done.stdout
    # The run holds the study's episodes only: one folder per task, each with its verdict.
    assert sorted(p.name for p in Path(run_dir.group(1)).iterdir() if not p.name.startswith(".")) == [
        "1001", "1003", "1004"]  # fmt: skip
    for task_id, reward in rewards.items():
        verdict = json.loads((Path(run_dir.group(1)) / str(task_id) / "eval_result.json").read_text())
        assert reward == verdict["score"] == 1.0, (task_id, verdict["status"])  # the demo's right answers
    cli = str(Path(sys.executable).parent / "webarena-live")
    report = subprocess.run(
        [cli, "report", run_dir.group(1), "--json"], capture_output=True, text=True, timeout=120
    )
    assert report.returncode == 0, report.stderr
    counted = json.loads(report.stdout)  # the study's report: its three episodes, not the module's others
    assert (counted["tasks"], counted["attempts"], counted["success"]) == (3, 3, 3), counted
