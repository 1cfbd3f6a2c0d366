"""Running the wiki agents through `webarena-live serve` and judging every run three ways.

For each task its correct and its wrong agent run at the same time, each in its own browser
context and proxy session (the session port, two sessions at a time), and each context records
Playwright's own HAR of what the browser did. A run is then judged by
  1. the live proxy (the finish call's verdict),
  2. the oracle on the run directory the proxy wrote (`OUT/<agent>/<task_id>/`, via `"run"`),
  3. the oracle on a run directory holding the browser's HAR and the same agent_response.json,
and the three must agree with each other and with the plan (correct -> success, wrong -> failure).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from playwright.async_api import Browser, async_playwright

from tests.site.harness import CHROMIUM, CHROMIUM_ARGS, ProxyProcess, oracle_verdicts
from tests.wiki.agents import AGENTS, WITHOUT_JAVASCRIPT, Agent, Wiki

KINDS = ("correct", "wrong")
PLANNED = {"correct": "success", "wrong": "failure"}


@dataclass
class Run:
    task_id: int
    kind: str
    session: str
    live: dict[str, Any]
    seconds: float
    proxy_dir: Path
    """OUT/<kind>/<task_id>/ as the proxy wrote it."""
    browser_dir: Path
    """The same run as Playwright's HAR saw it, next to the same agent_response.json."""
    oracle_on_proxy: str = "?"
    oracle_on_browser: str = "?"

    @property
    def planned(self) -> str:
        return PLANNED[self.kind]

    @property
    def verdicts(self) -> tuple[str, str, str]:
        return (str(self.live["status"]), self.oracle_on_proxy, self.oracle_on_browser)


async def run_agent(
    browser: Browser, proxy: ProxyProcess, wiki: Wiki, har_root: Path, task_id: int, kind: str, agent: Agent
) -> Run:
    session = f"wiki-{task_id}-{kind}"
    # "run": the two agents of a task write OUT/correct/<id>/ and OUT/wrong/<id>/, not one folder.
    body = {"task_id": task_id, "session": session, "run": kind}
    reply = await asyncio.to_thread(proxy.control.post, "/sessions", body)
    assert reply.status_code in (200, 201), f"POST /sessions {body}: {reply.status_code} {reply.text}"
    browser_dir = har_root / kind / str(task_id)
    browser_dir.mkdir(parents=True)
    started = time.monotonic()
    context = await browser.new_context(
        proxy={"server": proxy.session_proxy_url, "username": session, "password": "x"},
        record_har_path=str(browser_dir / "network.har"),
        record_har_content="embed",
        java_script_enabled=task_id not in WITHOUT_JAVASCRIPT,
    )
    try:
        response = await agent(await context.new_page(), wiki)
    finally:
        await context.close()  # writes the browser's HAR
    live = await asyncio.to_thread(proxy.control.finish, session, response)
    proxy_dir = proxy.output_dir / kind / str(task_id)
    # The oracle judges both HARs with the one answer file the proxy wrote (official field names).
    shutil.copy2(proxy_dir / "agent_response.json", browser_dir / "agent_response.json")
    return Run(task_id, kind, session, live, time.monotonic() - started, proxy_dir, browser_dir)


async def run_all(proxy: ProxyProcess, wiki_url: str, har_root: Path) -> list[Run]:
    """Every agent of tests/wiki/agents.py, at most two at a time, a task's two agents side by side."""
    wiki = Wiki(wiki_url)
    # A slot frees as soon as either agent ends, rather than when its partner does: same pairs,
    # less waiting.
    slots = asyncio.Semaphore(2)

    async def one(browser: Browser, task_id: int, kind: str, agent: Agent) -> Run:
        async with slots:
            return await run_agent(browser, proxy, wiki, har_root, task_id, kind, agent)

    async with async_playwright() as playwright:
        # Without images: a DokuWiki page view asks for a dozen of them (logo, footer badges), which
        # tell an agent nothing and would make up most of the suite's requests and time.
        args = [*CHROMIUM_ARGS, "--blink-settings=imagesEnabled=false"]
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=args)
        try:
            jobs = [
                one(browser, task_id, kind, agent)
                for task_id, pair in AGENTS.items()
                for kind, agent in zip(KINDS, pair, strict=True)
            ]
            return list(await asyncio.gather(*jobs))
        finally:
            await browser.close()


def judge_with_oracle(runs: list[Run], oracle_python: Path, config: Path, workdir: Path) -> None:
    """Fill in both oracle columns: `webarena-verified eval-tasks` on four run directories (proxy
    and browser HARs of the correct and the wrong agents), side by side.

    The oracle writes eval_result.json into what it judges, so it judges copies: the proxy's own
    outputs keep the live eval_result.json.
    """
    directories: dict[tuple[str, str], Path] = {}
    for run in runs:
        for source, original in (("proxy", run.proxy_dir), ("browser", run.browser_dir)):
            target = workdir / source / run.kind / str(run.task_id)
            target.mkdir(parents=True)
            for name in ("agent_response.json", "network.har"):
                shutil.copy2(original / name, target / name)
            directories[(source, run.kind)] = target.parent
    keys = sorted(directories)

    def judge(key: tuple[str, str]) -> dict[int, dict[str, Any]]:
        return oracle_verdicts(oracle_python, directories[key], config)

    with ThreadPoolExecutor(max_workers=len(keys)) as pool:
        results = dict(zip(keys, pool.map(judge, keys), strict=True))
    for run in runs:
        run.oracle_on_proxy = results[("proxy", run.kind)].get(run.task_id, {}).get("status", "missing")
        run.oracle_on_browser = results[("browser", run.kind)].get(run.task_id, {}).get("status", "missing")


def table(runs: Iterable[Run], tasks: dict[int, dict[str, Any]]) -> str:
    """The three-way table, one line per run, as the test prints it."""
    header = ("task", "type", "agent", "planned", "live", "oracle/proxy HAR", "oracle/browser HAR", "s")
    rows = [header]
    for run in runs:
        kind_of_task = tasks[run.task_id]["eval"][0]["expected"]["task_type"]
        rows.append(
            (str(run.task_id), kind_of_task, run.kind, run.planned, *run.verdicts, f"{run.seconds:.1f}")
        )
    widths = [max(len(row[column]) for row in rows) for column in range(len(header))]
    lines = [" | ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)) for row in rows]
    lines.insert(1, "-+-".join("-" * width for width in widths))
    return "\n".join(lines)


def disagreements(runs: Iterable[Run]) -> list[str]:
    """Every run whose three verdicts are not all the planned one, with the live details."""
    problems = []
    for run in runs:
        if set(run.verdicts) != {run.planned}:
            failing = [
                f"{item['evaluator_name']}: {item['status']} {str(item.get('error_msg') or '')[:300]}"
                for item in run.live["evaluators_results"]
            ]
            problems.append(f"{run.task_id} {run.kind}: planned {run.planned}, (live, oracle/proxy, "
                            f"oracle/browser) = {run.verdicts}; live evaluators: {failing}")  # fmt: skip
    return problems


def load_tasks_by_id(path: Path) -> dict[int, dict[str, Any]]:
    return {task["task_id"]: task for task in json.loads(path.read_text())}
