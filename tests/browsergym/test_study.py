"""The study recipe (examples/agentlab_study.py) run by BrowserGym's ExpArgs loop, four episodes at once
on three demo-shop replicas under `--isolation readers`: the two readers share a copy, each mutating
task holds one alone, and the rewards in the experiments' own results (summary_info.json) are the
reference's verdicts on the HARs the proxy wrote.

AgentLab itself is not installed here (it brings torch, Ray, gradio and LLM clients: gigabytes for CI);
its Study runs these same EnvArgs and Benchmark through a copy of this loop (README, "BrowserGym and
AgentLab").
"""

from __future__ import annotations

import json
import shutil
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
