"""Rollouts on Ray: Chromium agents as Ray tasks, each session placed near its agent, the verdicts
gathered as rewards.

    pip install 'webarena-live[ray]' playwright
    python examples/ray_rollout.py --config sites.json --output-dir out --episodes 8
    python examples/ray_rollout.py --address auto ...    # a cluster that runs already (ray start)

Starts a fleet of `serve --ray` workers on the cluster (`webarena_live.ray.start_fleet`), then one
Ray task per episode. Each task asks for a session near the node it runs on (`near`: its node id),
so its browser's traffic stays on that node, launches headless Chromium with the session's own
proxy address, runs a toy policy on task 1003 ("go to the product page of the cheapest mug": it
opens a mug page picked at random, the right one or not) and finishes: its reward is the
benchmark's own verdict, 0 or 1. A failed episode is reported and the others go on. The files of
every episode land in `--output-dir` on this machine, whichever node ran it: the run
`OUT/ray-rollout/`, each episode an attempt of task 1003 (the last in `1003/`, the others in
`.attempts/1003/<n>/`), so `webarena-live report OUT/ray-rollout` gives the same mean per attempt.
"""

from __future__ import annotations

import argparse
import random
import sys
from typing import Any

import ray

from webarena_live.ray import start_fleet

TASK = 1003
RUN = "ray-rollout"
"""The run every episode's files go to: `OUT/ray-rollout/`."""
ANSWER = {"task_type": "navigate", "status": "SUCCESS", "retrieved_data": None}
PAGES = ("enamel-camp-mug.html", "stoneware-coffee-mug-12oz.html", "double-wall-travel-mug.html")


def episode(fleet: Any, index: int, chromium: str) -> dict[str, Any]:
    """One episode in a Ray task: a session near this node, a browser on its address, a verdict."""
    from playwright.sync_api import sync_playwright

    node = ray.get_runtime_context().get_node_id()
    started = ray.get(fleet.start.remote(TASK, session=f"ray-rollout-{index}", run=RUN, near=node))
    target = f"{started['start_urls'][0].rstrip('/')}/{random.Random(index).choice(PAGES)}"
    # Chromium proxies loopback sites (a shop on 127.0.0.1) only when told to; as root it needs
    # --no-sandbox.
    flags = [f"--proxy-server={started['proxy']}", "--proxy-bypass-list=<-loopback>",
             "--disable-background-networking", "--no-sandbox"]  # fmt: skip
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=flags)
        try:
            page = browser.new_page()
            page.goto(started["start_urls"][0])
            page.goto(target)
        finally:
            browser.close()
    verdict = ray.get(fleet.finish.remote(started["session"], ANSWER))
    return {"episode": index, "node": node, "worker_node": started["node"], "reward": verdict["score"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", default=None, help="Ray cluster to join ('auto': the running one; "
                        "default: a new local one)")  # fmt: skip
    parser.add_argument("--config", required=True, help="site map (the demo shop's URL under __SHOPPING__)")
    parser.add_argument("--output-dir", default="ray-rollout-out", help="where every episode's files go")
    parser.add_argument("--workers", type=int, default=2, help="proxy workers on the cluster")
    parser.add_argument("--episodes", type=int, default=8, help="episodes, each a Ray task with a browser")
    parser.add_argument("--agent-cpus", type=float, default=0.0,
                        help="CPUs each episode's task reserves (default 0: the workers hold a CPU each, and "
                             "on a small machine episodes asking for more would wait for ever)")  # fmt: skip
    parser.add_argument("--chromium", default="/usr/bin/chromium", help="Chromium binary")
    args = parser.parse_args(argv)

    ray.init(address=args.address)
    fleet = start_fleet(args.workers, config=args.config, output_dir=args.output_dir)
    print(f"dashboard: {ray.get(fleet.control_url.remote())}/", flush=True)
    run = ray.remote(num_cpus=args.agent_cpus, max_retries=0)(episode)
    pending = {run.remote(fleet, index, args.chromium): index for index in range(args.episodes)}
    outcomes: dict[int, dict[str, Any] | BaseException] = {}
    for ref, index in pending.items():  # one failed episode must not take the others with it
        try:
            outcomes[index] = ray.get(ref)
        except Exception as error:  # a browser crash, a site down: reported below
            outcomes[index] = error
    ray.get(fleet.stop.remote())

    rewards = []
    for index, outcome in sorted(outcomes.items()):
        if isinstance(outcome, BaseException):
            print(f"episode {index} failed: {type(outcome).__name__}: {outcome}", file=sys.stderr)
            continue
        near = "near" if outcome["node"] == outcome["worker_node"] else "not near"
        where = f"agent on node {outcome['node'][:8]}, {near} its worker"
        print(f"episode {index}: reward {outcome['reward']} ({where})")
        rewards.append(outcome["reward"])
    if not rewards:
        print("no episode finished", file=sys.stderr)
        return 1
    print(f"{len(rewards)} episodes, mean reward {sum(rewards) / len(rewards):.3f}; "
          f"every episode in figures: webarena-live report {args.output_dir}/{RUN}")  # fmt: skip
    return 0 if len(rewards) == args.episodes else 1


if __name__ == "__main__":
    sys.exit(main())
