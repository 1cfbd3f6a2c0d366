"""An asyncio rollout loop: many concurrent sessions, one reward (the official verdict) each.

    python examples/rollout.py --control http://127.0.0.1:8081 --proxy-port 8080 --sessions 32
    python examples/rollout.py ... --browsers 4    # the first 4 sessions drive real Chromium

Each session runs one episode of a toy policy on task 1003 ("go to the product
page of the cheapest mug"): it opens a mug page picked at random, the right one
or not. Plain HTTP episodes browse with httpx through the proxy port (credentials
sent up front); browser episodes drive headless Chromium through the session
port. After every step the episode asks for `preview` — the reward a finish
would give now — and finishes; the reward is the finish's score: 0 or 1, the
benchmark's own verdict, not a mean of evaluator scores. Prints the mean reward.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys

import httpx
from playwright.async_api import Browser, async_playwright

from webarena_live.client import AsyncClient, proxy_url

TASK = 1003
ANSWER = {"task_type": "navigate", "status": "SUCCESS", "retrieved_data": None}
PAGES = ("enamel-camp-mug.html", "stoneware-coffee-mug-12oz.html", "double-wall-travel-mug.html")


async def episode(api: AsyncClient, name: str, args: argparse.Namespace, browser: Browser | None) -> float:
    started = await api.start(TASK, session=name, restart=True)
    target = f"{started.start_urls[0].rstrip('/')}/{random.Random(name).choice(PAGES)}"
    if browser is None:
        async with httpx.AsyncClient(proxy=proxy_url(name, port=args.proxy_port), trust_env=False) as agent:
            await agent.get(started.start_urls[0], headers={"Accept": "text/html"})
            await agent.get(target, headers={"Accept": "text/html"})
    else:
        context = await browser.new_context(
            proxy={"server": f"http://127.0.0.1:{args.session_port}", "username": name, "password": "x"}
        )
        page = await context.new_page()
        await page.goto(started.start_urls[0])
        await page.goto(target)
        await context.close()
    shaped = await api.preview(name, ANSWER)  # a per-step signal, if the learner wants one
    result = await api.finish(name, ANSWER)
    assert shaped.score == result.score  # nothing happened in between: preview and finish agree
    return result.score


async def rollout(args: argparse.Namespace) -> list[float]:
    async with AsyncClient(args.control) as api, async_playwright() as playwright:
        browser = None
        if args.browsers:
            browser = await playwright.chromium.launch(executable_path=args.chromium)
        try:
            episodes = [
                episode(api, f"rollout-{i}", args, browser if i < args.browsers else None)
                for i in range(args.sessions)
            ]
            return list(await asyncio.gather(*episodes))
        finally:
            if browser is not None:
                await browser.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--control", default="http://127.0.0.1:8081", help="control API URL")
    parser.add_argument("--proxy-port", type=int, default=8080, help="the proxy port (HTTP episodes)")
    parser.add_argument("--session-port", type=int, default=8082, help="the session port (browser episodes)")
    parser.add_argument("--sessions", type=int, default=32, help="concurrent episodes")
    parser.add_argument("--browsers", type=int, default=0, help="how many of them drive real Chromium")
    parser.add_argument("--chromium", default="/usr/bin/chromium", help="Chromium binary")
    args = parser.parse_args(argv)
    rewards = asyncio.run(rollout(args))
    print(f"{len(rewards)} episodes, mean reward {sum(rewards) / len(rewards):.3f}: {rewards}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
