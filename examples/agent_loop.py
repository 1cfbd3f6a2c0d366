"""A Playwright agent that checks its progress after every step, then previews its answer before finishing.

Run it against a live proxy serving the demo tasks with the demo shop mapped
(see docs/guides/agent-loops.md):

    python examples/agent_loop.py --control http://127.0.0.1:8081 --session-port 8082

The "agent" is scripted (task 1007: search for backpacks, sort by price from
high to low); a learning agent would choose its next step where this one
follows a script, and could stop as soon as every network evaluator is
satisfied. Exits 0 when the final verdict is a success.
"""

from __future__ import annotations

import argparse
import sys

from playwright.sync_api import Page, sync_playwright

from webarena_live.client import Client

TASK = 1007
ANSWER = {"task_type": "navigate", "status": "SUCCESS", "retrieved_data": None}


def steps(page: Page, start_url: str) -> list[tuple[str, object]]:
    """The agent's actions, one callable per step, with what it does."""
    search = f"{start_url.rstrip('/')}/catalogsearch/result/?q=backpack"
    return [
        ("open the shop", lambda: page.goto(start_url)),
        ("search for backpacks", lambda: page.goto(search)),
        (
            "sort by price, high to low",
            lambda: page.goto(f"{search}&product_list_order=price&product_list_dir=desc"),
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--control", default="http://127.0.0.1:8081", help="control API URL")
    parser.add_argument("--session-port", type=int, default=8082, help="the proxy's session port")
    parser.add_argument("--session", default="agent-loop", help="session name")
    parser.add_argument("--chromium", default="/usr/bin/chromium", help="Chromium binary")
    args = parser.parse_args(argv)

    with Client(args.control) as api, sync_playwright() as playwright:
        started = api.start(TASK, session=args.session, restart=True)
        print(f"task {TASK}: {started.intent}")
        browser = playwright.chromium.launch(
            executable_path=args.chromium,
            proxy={
                "server": f"http://127.0.0.1:{args.session_port}",
                "username": args.session,
                "password": "x",
            },
        )
        page = browser.new_page()
        for name, act in steps(page, started.start_urls[0]):
            act()  # type: ignore[operator]
            progress = api.progress(args.session)
            done = sum(item.satisfied for item in progress.network)
            seen = f"{done}/{len(progress.network)}"
            print(f"after '{name}': {progress.events} events, {seen} expected requests seen")
        browser.close()
        preview = api.preview(args.session, ANSWER)  # what the finish would say, with nothing finished
        print(f"preview: {preview.status} (score {preview.score:g})")
        result = api.finish(args.session, ANSWER)
        print(f"verdict: {result.status} (score {result.score:g})")
        return 0 if result.score == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
