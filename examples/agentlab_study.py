"""An AgentLab study (or BrowserGym's own experiment loop) whose episodes run on leased replicas.

    webarena-live serve --config sites.json --isolation readers --output-dir OUT   # replicas in sites.json
    python examples/agentlab_study.py --control http://127.0.0.1:8081 --tasks 1001,1003,1004 --n-jobs 4

Each task of the proxy becomes an `EnvArgs` named `wa_live.<task_id>` (not `webarena...`, which AgentLab
takes for its own single-deployment WebArena: a manual reset between agents, one agent at a time), in a
`Benchmark` with no backend to prepare, no dependency graph and no full reset: every episode's
`reset()` leases a clean replica (waiting for a free one), and its reward is the official verdict the
proxy gives when the agent sends its message to the user. Run as many jobs as the replicas can
take; the proxy's `--isolation` decides who shares a copy.

With AgentLab installed (`pip install agentlab`), `--agent` names one of its agents (an LLM agent needs
its API key) and the study is AgentLab's `Study`. Without AgentLab, `run_experiments` runs BrowserGym's
`ExpArgs` loop in N processes: the same EnvArgs and Benchmark, the loop AgentLab's runs are built on.
The control token, when the proxy wants one, comes from WEBARENA_LIVE_TOKEN (it is never written into
the experiments' saved arguments).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from browsergym.experiments.benchmark import Benchmark, HighLevelActionSetArgs

from webarena_live.browsergym import ENV_PREFIX, ensure_registered, register_tasks, task_name

try:  # AgentLab's own EnvArgs: its Study keeps an EnvArgs of its own class as it is
    from agentlab.experiments.loop import EnvArgs
except ImportError:
    from browsergym.experiments.loop import EnvArgs


@dataclass
class LiveEnvArgs(EnvArgs):  # type: ignore[misc]
    """An EnvArgs whose environment is webarena-live's: it registers its gym id in whatever process
    runs the experiment (AgentLab's and BrowserGym's loops make the env in a worker process)."""

    def make_env(self, *args: Any, **kwargs: Any) -> Any:
        ensure_registered(self.task_name)
        return super().make_env(*args, **kwargs)


def live_benchmark(
    control: str,
    task_ids: Sequence[int],
    *,
    max_steps: int = 30,
    n_repeats: int = 1,
    slow_mo: int | None = None,
    name: str = ENV_PREFIX,
) -> Benchmark:
    """A Benchmark of `task_ids` on the proxy at `control`, `n_repeats` episodes each."""
    if "webarena" in name:
        raise ValueError(
            "AgentLab runs a benchmark named '*webarena*' one agent at a time: pick another name"
        )
    env_args_list = [
        LiveEnvArgs(
            task_name=task_name(task_id),
            task_seed=repeat,
            max_steps=max_steps,
            headless=True,
            slow_mo=slow_mo,
            task_kwargs={"control": control},
        )
        for task_id in task_ids
        for repeat in range(n_repeats)
    ]
    return Benchmark(
        name=name,
        # BrowserGym's WebArena action set, so WebArena agents carry over unchanged
        high_level_action_set_args=HighLevelActionSetArgs(subsets=("webarena",)),
        is_multi_tab=True,
        supports_parallel_seeds=True,
        env_args_list=env_args_list,
        backends=[],  # nothing to prepare: the proxy resets replicas itself, only where something changed
    )


def _run_one(exp_args: Any) -> str:
    exp_args.run()
    return str(exp_args.exp_dir)


def run_experiments(exp_args_list: Sequence[Any], root: Path, n_jobs: int) -> list[Path]:
    """BrowserGym's ExpArgs loop, `n_jobs` experiments at a time, each in a process of its own
    (BrowserGym's Playwright is one per process). Returns the experiments' folders, in order."""
    for exp_args in exp_args_list:
        exp_args.prepare(root)
    context = multiprocessing.get_context("spawn")  # never fork a process that may run Playwright
    with ProcessPoolExecutor(max_workers=n_jobs, mp_context=context) as pool:
        return [Path(folder) for folder in pool.map(_run_one, exp_args_list)]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--control", default=os.environ.get("WEBARENA_LIVE_CONTROL", "http://127.0.0.1:8081"))
    parser.add_argument("--tasks", help="task ids, comma-separated (default: every task the proxy loaded)")
    parser.add_argument("--n-jobs", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--agent", default="AGENT_4o_MINI", help="an agent of agentlab.agents.generic_agent")
    args = parser.parse_args()
    names = register_tasks(args.control, token=os.environ.get("WEBARENA_LIVE_TOKEN"))
    task_ids = (
        [int(t) for t in args.tasks.split(",")] if args.tasks else [int(n.split(".")[1]) for n in names]
    )
    benchmark = live_benchmark(args.control, task_ids, n_repeats=args.repeats)
    from agentlab.agents import generic_agent
    from agentlab.experiments.study import Study

    study = Study([getattr(generic_agent, args.agent)], benchmark)
    study.run(n_jobs=args.n_jobs, parallel_backend="ray", n_relaunch=1)
    print(f"results in {study.dir}")


if __name__ == "__main__":
    main()
