"""An asyncio rollout loop: many concurrent sessions, one reward (the official verdict) each.

    python examples/rollout.py --control http://127.0.0.1:8081 --sessions 32
    python examples/rollout.py ... --browsers 4    # the first 4 sessions drive real Chromium
    webarena-live report OUT/rollout               # the same mean, per attempt, from the files

Each session runs one episode of a toy policy on task 1003 ("go to the product
page of the cheapest mug"): it opens a mug page picked at random, the right one
or not. Every episode browses through its session's own proxy address (what
`POST /sessions` answers: no credentials, no port to configure): plain HTTP
episodes with httpx, browser episodes with headless Chromium. After its steps
the episode asks for `preview` — the reward a finish would give now — and
finishes; the reward is the finish's score: 0 or 1, the benchmark's own
verdict, not a mean of evaluator scores. An episode that fails (a site down, a
browser crash) is reported and counted apart; the others go on. Prints the
mean reward of the episodes that finished. With `serve --output-dir OUT`, every
episode's files land in the run `OUT/<--run>/` (each a separate attempt of task
1003, none lost), so `webarena-live report OUT/<--run>` gives the same mean per attempt.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys

import httpx
from playwright.async_api import Browser, async_playwright

from webarena_live.client import AsyncClient

TASK = 1003
ANSWER = {"task_type": "navigate", "status": "SUCCESS", "retrieved_data": None}
PAGES = ("enamel-camp-mug.html", "stoneware-coffee-mug-12oz.html", "double-wall-travel-mug.html")


async def episode(api: AsyncClient, name: str, browser: Browser | None, run: str) -> float:
    # `wait`: with replica pools, an episode waits its turn for a copy of the site rather than fail
    started = await api.start(TASK, session=name, restart=True, run=run, wait=120)
    target = f"{started.start_urls[0].rstrip('/')}/{random.Random(name).choice(PAGES)}"
    if browser is None:
        async with httpx.AsyncClient(proxy=started.proxy, trust_env=False) as agent:
            await agent.get(started.start_urls[0], headers={"Accept": "text/html"})
            await agent.get(target, headers={"Accept": "text/html"})
    else:
        # The session's own address: no credentials, so Playwright keeps the browser's cache on.
        context = await browser.new_context(proxy={"server": str(started.proxy)})
        page = await context.new_page()
        await page.goto(started.start_urls[0])
        await page.goto(target)
        await context.close()
    shaped = await api.preview(name, ANSWER)  # a per-step signal, if the learner wants one
    result = await api.finish(name, ANSWER)
    assert shaped.score == result.score  # nothing happened in between: preview and finish agree
    return result.score


async def rollout(args: argparse.Namespace) -> list[float | BaseException]:
    async with AsyncClient(args.control) as api, async_playwright() as playwright:
        browser = None
        if args.browsers:
            # Chromium proxies loopback sites (the demo shop) only when told to.
            args_ = ["--proxy-bypass-list=<-loopback>", "--disable-background-networking"]
            browser = await playwright.chromium.launch(executable_path=args.chromium, args=args_)
        try:
            episodes = [
                episode(api, f"rollout-{i}", browser if i < args.browsers else None, args.run)
                for i in range(args.sessions)
            ]
            # One failed episode must not take the others with it: each outcome is kept.
            return list(await asyncio.gather(*episodes, return_exceptions=True))
        finally:
            if browser is not None:
                await browser.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--control", default="http://127.0.0.1:8081", help="control API URL")
    parser.add_argument("--sessions", type=int, default=32, help="concurrent episodes")
    parser.add_argument("--browsers", type=int, default=0, help="how many of them drive real Chromium")
    parser.add_argument("--chromium", default="/usr/bin/chromium", help="Chromium binary")
    parser.add_argument("--run", default="rollout", help="the run the episodes' files go to (OUT/RUN/)")
    args = parser.parse_args(argv)
    outcomes = asyncio.run(rollout(args))
    rewards = [outcome for outcome in outcomes if isinstance(outcome, float)]
    for index, outcome in enumerate(outcomes):
        if not isinstance(outcome, float):
            print(f"episode rollout-{index} failed: {type(outcome).__name__}: {outcome}", file=sys.stderr)
    if not rewards:
        print("no episode finished", file=sys.stderr)
        return 1
    print(f"{len(rewards)} episodes, mean reward {sum(rewards) / len(rewards):.3f}: {rewards}")
    print(f"every episode's files (with serve --output-dir OUT): webarena-live report OUT/{args.run}")
    return 0 if len(rewards) == len(outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
