"""An AgentLab study (or BrowserGym's own experiment loop) whose episodes run on leased replicas.

    pip install 'webarena-live[browsergym]'       # Python 3.12; brings browsergym-experiments too
    webarena-live serve --config sites.json --isolation readers --output-dir OUT   # replicas in sites.json
    python examples/agentlab_study.py --control http://127.0.0.1:8081 --tasks 1001,1003,1004 --n-jobs 3 \
        --agent demo

Each task of the proxy becomes an `EnvArgs` named `wa_live.<task_id>` (not `webarena...`, which AgentLab
takes for its own single-deployment WebArena: a manual reset between agents, one agent at a time), in a
`Benchmark` with no backend to prepare, no dependency graph and no full reset: every episode's
`reset()` leases a clean replica (waiting for a free one), and its reward is the official verdict the
proxy gives when the agent sends its message to the user (NaN when the environment failed the episode:
its lease ended, its replica was exposed, a site did not answer). Run as many jobs as the replicas can
take; the proxy's `--isolation` decides who shares a copy.

A study is a run: its episodes' sessions are written in the run named by `--run` (default: the study's
name and the time), so `webarena-live report OUT/<run>` counts its episodes only; the study prints
where to look when it ends.

`--agent demo` (the default) needs neither AgentLab nor an LLM: the demo's own scripted agent
(`webarena-live demo`'s, right and wrong on purpose) plays the demo tasks (1001-1007) through
BrowserGym's Python actions, in BrowserGym's `ExpArgs` loop, N processes at once. With AgentLab
installed (`pip install agentlab`), `--agent NAME` names one of its generic agents (an LLM agent needs
its API key) and the study is AgentLab's `Study`; AgentLab is imported only then. The control token,
when the proxy wants one, comes from WEBARENA_LIVE_CONTROL_TOKEN (never written into the experiments'
saved arguments). Nothing is downloaded: the loop's token counts are word counts (see
webarena_live.browsergym.offline_token_counts).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import os
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from browsergym.core.action.python import PythonActionSet
from browsergym.experiments.agent import Agent
from browsergym.experiments.benchmark import Benchmark, HighLevelActionSetArgs
from browsergym.experiments.loop import AbstractAgentArgs, EnvArgs, ExpArgs

from webarena_live.browsergym import ENV_PREFIX, ensure_registered, register_tasks, some_chromium, task_name
from webarena_live.client import Client, ControlAPIError, token_from_env


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


DEMO_ACTION = """import json
from webarena_live.demo.agent import ATTEMPTS
attempt = next(a for a in ATTEMPTS if a.task_id == {task_id})
send_message_to_user(json.dumps(attempt.act(page, {start_url!r})))
"""
"""The demo agent's one action: the demo's own routine for the task (addon/demo/agent.py) on BrowserGym's
page, its final response sent to the user (BrowserGym's Python action set runs it with `page` at hand)."""


def demo_tasks() -> dict[str, int]:
    """The demo tasks' intents -> their ids: how the demo agent knows its task from the goal."""
    from webarena_live.evaluator import default_tasks_path

    return {task["intent"]: int(task["task_id"]) for task in json.loads(default_tasks_path().read_text())}


class DemoAgent(Agent):
    """`webarena-live demo`'s scripted agent in BrowserGym: reads the task from the goal, plays the demo's
    routine for it in one action, then stops."""

    def __init__(self) -> None:
        self.action_set = PythonActionSet()
        self.done = False

    def obs_preprocessor(self, obs: dict[str, Any]) -> dict[str, Any]:
        return {key: obs[key] for key in ("goal_object", "url")}  # all it reads: no tree to pickle

    def get_action(self, obs: Any) -> tuple[str | None, dict[str, Any]]:
        if self.done:
            return None, {}
        goal = obs["goal_object"][0]["text"].split("\n\n---")[0]
        task_id = demo_tasks().get(goal)
        if task_id is None:
            raise ValueError(f"the demo agent knows the demo tasks only, not: {goal!r}")
        self.done = True
        return DEMO_ACTION.format(task_id=task_id, start_url=obs["url"]), {}


@dataclass
class DemoAgentArgs(AbstractAgentArgs):  # type: ignore[misc]
    agent_name: str = "demo"

    def make_agent(self) -> Agent:
        return DemoAgent()


def agentlab_env_args(env_args_list: Sequence[Any]) -> list[Any]:
    """The same EnvArgs as AgentLab's own class (its Study keeps an EnvArgs of its own class as it is);
    AgentLab is imported here only, when an AgentLab agent is asked for."""
    from agentlab.experiments.loop import EnvArgs as AgentLabEnvArgs

    @dataclass
    class AgentLabLiveEnvArgs(AgentLabEnvArgs):  # type: ignore[misc]
        def make_env(self, *args: Any, **kwargs: Any) -> Any:
            ensure_registered(self.task_name)
            return super().make_env(*args, **kwargs)

    return [AgentLabLiveEnvArgs(**dataclasses.asdict(env_args)) for env_args in env_args_list]


def run_name(study: str, given: str | None = None) -> str:
    """The study's run: `given`, else the study's name and the time (a new run each time)."""
    return given or f"{study}-{time.strftime('%Y%m%d-%H%M%S')}"


def with_run(benchmark: Benchmark, run: str) -> Benchmark:
    """The benchmark's episodes written in `run`, each session named by the run, its task and seed."""
    for env_args in benchmark.env_args_list:
        task_id = env_args.task_name.split(".")[1]
        env_args.task_kwargs = {**env_args.task_kwargs, "run": run,
                                "session": f"{run}-{task_id}-{env_args.task_seed}"}  # fmt: skip
    return benchmark


def where(control: str, run: str, token: str | None) -> list[str]:
    """The lines that say where the study's results are: the run directory, its report, the dashboard."""
    with Client(control, token=token, verify=False) as client:
        output_dir = client.health().get("output_dir")
    run_dir = Path(output_dir) / run if output_dir else None
    return [
        f"run: {run}",
        f"run directory: {run_dir if run_dir else '(the proxy writes no files: serve --output-dir OUT)'}",
        f"report: webarena-live report {run_dir or 'OUT/' + run}",
        f"dashboard: {control.rstrip('/')}/dashboard/",
    ]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--control", default=os.environ.get("WEBARENA_LIVE_CONTROL", "http://127.0.0.1:8081"))
    parser.add_argument("--tasks", help="task ids, comma-separated (default: every task the proxy loaded)")
    parser.add_argument("--n-jobs", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--max-steps", type=int, default=30)
    parser.add_argument(
        "--agent", default="demo", help="demo (no LLM, no AgentLab), or an AgentLab generic agent"
    )
    parser.add_argument("--study", default=ENV_PREFIX, help="the study's (and the benchmark's) name")
    parser.add_argument("--run", help="the run its sessions are written in (default: STUDY-YYYYmmdd-HHMMSS)")
    parser.add_argument(
        "--exp-root", type=Path, default=Path("browsergym_results"), help="BrowserGym's experiment folders"
    )
    args = parser.parse_args(argv)
    if (browsers := some_chromium()) is not None:  # workers inherit it through the environment
        print(f"Playwright's Chromium is not installed: the system's, through {browsers}")
    token = token_from_env()
    try:
        names = register_tasks(args.control, token=token)
    except (httpx.HTTPError, ControlAPIError) as error:
        parser.exit(2, f"the control API at {args.control} did not answer: {error} (is `webarena-live serve` "
                    "running? --control names its URL)\n")  # fmt: skip
    task_ids = (
        [int(t) for t in args.tasks.split(",")] if args.tasks else [int(n.split(".")[1]) for n in names]
    )
    run = run_name(args.study, args.run)
    benchmark = with_run(
        live_benchmark(
            args.control, task_ids, n_repeats=args.repeats, max_steps=args.max_steps, name=args.study
        ),
        run,
    )
    if args.agent == "demo":
        unknown = sorted(set(task_ids) - set(demo_tasks().values()))
        if unknown:
            parser.error(
                f"--agent demo plays the demo tasks ({sorted(demo_tasks().values())}), not {unknown}"
            )
        exp_args_list = [ExpArgs(agent_args=DemoAgentArgs(), env_args=e) for e in benchmark.env_args_list]
        folders = run_experiments(exp_args_list, args.exp_root / run, args.n_jobs)
        for env_args, folder in zip(benchmark.env_args_list, folders, strict=True):
            summary = json.loads((folder / "summary_info.json").read_text())
            error = f", error: {summary['err_msg']}" if summary.get("err_msg") else ""
            print(
                f"{env_args.task_name} seed {env_args.task_seed}: cum_reward {summary['cum_reward']}{error}"
            )
        print(f"experiments: {(args.exp_root / run).resolve()}")
    else:
        try:
            from agentlab.agents import generic_agent
            from agentlab.experiments.study import Study
        except ImportError as error:
            parser.error(f"--agent {args.agent} is an AgentLab agent: pip install agentlab ({error}); "
                         "--agent demo needs neither AgentLab nor an LLM")  # fmt: skip

        benchmark.env_args_list = agentlab_env_args(benchmark.env_args_list)
        study = Study([getattr(generic_agent, args.agent)], benchmark)
        study.run(n_jobs=args.n_jobs, parallel_backend="ray", n_relaunch=1)
        print(f"experiments: {study.dir}")
    print("\n".join(where(args.control, run, token)))


if __name__ == "__main__":
    main()
