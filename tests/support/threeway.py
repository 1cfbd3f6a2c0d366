"""Every browser run judged three ways: live, the reference on our `network.har`, the reference on the
browser's own HAR (Playwright's `record_har`, what the official pipeline judges).

A test records each run as a `Judged` (its live verdict, the folder the proxy wrote and a folder
holding the browser's HAR beside the same `agent_response.json`), then `judge_three_ways` runs the
reference (`webarena-verified eval-tasks`) on both kinds of folder and fills in the two other
verdicts. `revalidations` counts what a run's HAR says about cache revalidations: the 304s the proxy
met (our HAR keeps them in `response._wire`) — a test of the browser cache prints it, and a run with
the cache on that met none is not testing it.

Cache on and off: a browser context reaching the proxy through the session's own address (no
credentials) keeps Chromium's HTTP cache on; one given proxy credentials (Playwright's
`proxy={"username": ...}`) has it turned off by Playwright, so nothing is ever revalidated.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from playwright.sync_api import Page, sync_playwright

from tests.site.harness import CHROMIUM, CHROMIUM_ARGS, ProxyProcess, oracle_verdicts

CACHE_MODES = ("on", "off")
"""`on`: the session's own address, no credentials; `off`: proxy credentials (Playwright then turns
the browser's cache off)."""

RUN_FILES = ("agent_response.json", "network.har")


def context_proxy(cache: str, *, session: str, address: str | None, session_proxy_url: str) -> dict[str, str]:
    """Playwright's `proxy=` for a context of `session`: its own address (cache on) or credentials (off)."""
    if cache == "on":
        assert address, f"session {session} has no address of its own"
        return {"server": address}
    assert cache == "off", cache
    return {"server": session_proxy_url, "username": session, "password": "x"}


@dataclass
class Judged:
    """One browser run: its live verdict and the two folders the reference judges."""

    label: str
    task_id: int
    live: str
    proxy_dir: Path
    """Holds agent_response.json and network.har as the proxy wrote them."""
    browser_har: Path | None
    """Playwright's HAR of the same run; None for a run without a browser (the reference then judges
    our HAR only)."""
    cache: str = "off"
    planned: str | None = None
    oracle_on_proxy: str = "?"
    oracle_on_browser: str = "?"
    browser_differs: tuple[str, str] | None = None
    """(the verdict the reference gives the browser's HAR, why) where a test knows it differs from the
    live one: a documented difference of the browser's recording, not of the proxy."""
    revalidated: int = field(default=0)
    """304s the proxy met in this run (entries of its network.har with `_wire`)."""

    @property
    def verdicts(self) -> tuple[str, ...]:
        if self.browser_har is None:
            return (self.live, self.oracle_on_proxy)
        return (self.live, self.oracle_on_proxy, self.oracle_on_browser)


def revalidations(har: Path) -> int:
    """Entries of a HAR we wrote whose wire status was a 304 the browser saw as its cached page."""
    entries = json.loads(har.read_text())["log"]["entries"]
    return sum(1 for entry in entries if entry.get("response", {}).get("_wire", {}).get("status") == 304)


def judge_three_ways(runs: Sequence[Judged], oracle_python: Path, config: Path, workdir: Path) -> None:
    """Fill in both reference verdicts and the revalidation count of every run.

    The reference judges a folder of `<task_id>/` folders at a time and writes into it, so each run is
    copied into a folder of its own kind and generation (runs of the same task never share one).
    """
    folders: dict[tuple[str, int], Path] = {}
    generations: dict[int, int] = {}
    placed: list[tuple[Judged, Path, Path | None]] = []
    for run in runs:
        run.revalidated = revalidations(run.proxy_dir / "network.har")
        generation = generations[run.task_id] = generations.get(run.task_id, -1) + 1
        proxy_root = workdir / "proxy" / f"run{generation}"
        answer = run.proxy_dir / "agent_response.json"
        _copy_run(answer, run.proxy_dir / "network.har", proxy_root / str(run.task_id))
        folders[("proxy", generation)] = proxy_root
        browser_root = None
        if run.browser_har is not None:
            browser_root = workdir / "browser" / f"run{generation}"
            _copy_run(answer, run.browser_har, browser_root / str(run.task_id))
            folders[("browser", generation)] = browser_root
        placed.append((run, proxy_root, browser_root))
    keys = sorted(folders)
    with ThreadPoolExecutor(max_workers=4) as pool:
        verdicts = pool.map(lambda key: oracle_verdicts(oracle_python, folders[key], config), keys)
        judged = dict(zip(keys, verdicts, strict=True))
    by_folder = {folders[key]: found for key, found in judged.items()}
    for run, proxy_root, browser_root in placed:
        run.oracle_on_proxy = by_folder[proxy_root].get(run.task_id, {}).get("status", "missing")
        if browser_root is not None:
            run.oracle_on_browser = by_folder[browser_root].get(run.task_id, {}).get("status", "missing")


def _copy_run(answer: Path, har: Path, target: Path) -> None:
    target.mkdir(parents=True, exist_ok=False)
    shutil.copy2(answer, target / "agent_response.json")
    shutil.copy2(har, target / "network.har")


def table(runs: Iterable[Judged]) -> str:
    """One line per run: the three verdicts, the cache mode and the 304s met."""
    header = ("run", "task", "cache", "planned", "live", "oracle/our HAR", "oracle/browser HAR", "304s")
    rows = [header]
    for run in runs:
        browser = run.oracle_on_browser if run.browser_har is not None else "(no browser)"
        if run.browser_differs is not None:
            browser += " (known: see the test)"
        verdicts = (run.live, run.oracle_on_proxy, browser)
        rows.append(
            (run.label, str(run.task_id), run.cache, run.planned or "-", *verdicts, str(run.revalidated))
        )
    widths = [max(len(row[column]) for row in rows) for column in range(len(header))]
    lines = [" | ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)) for row in rows]
    lines.insert(1, "-+-".join("-" * width for width in widths))
    return "\n".join(lines)


def disagreements(runs: Iterable[Judged]) -> list[str]:
    """Every run whose verdicts are not all equal (and equal to its plan, when it has one)."""
    problems = []
    for run in runs:
        wanted = run.planned or run.live
        expected = (wanted, wanted) if run.browser_har is None else (wanted, wanted, wanted)
        if run.browser_differs is not None and run.browser_har is not None:
            expected = (wanted, wanted, run.browser_differs[0])
        if run.verdicts != expected:
            problems.append(f"{run.label} (task {run.task_id}, cache {run.cache}): planned {run.planned}, "
                            f"(live, oracle/our HAR[, oracle/browser HAR]) = {run.verdicts}")  # fmt: skip
    return problems


def assert_three_ways(runs: Sequence[Judged], *, revalidated_at_least: int = 0) -> dict[str, Any]:
    """Print the table; fail on any disagreement, or when the cache-on runs met fewer 304s than asked."""
    print("\n" + table(runs))
    met = {mode: sum(run.revalidated for run in runs if run.cache == mode) for mode in CACHE_MODES}
    print(f"304s met (the browser's revalidations, recorded as the page it showed): cache on {met['on']}, "
          f"cache off {met['off']}")  # fmt: skip
    problems = disagreements(runs)
    assert not problems, "\n".join(problems)
    assert met["off"] == 0, "a browser with proxy credentials (cache off) revalidated something"
    assert met["on"] >= revalidated_at_least, (
        f"the cache-on runs met {met['on']} revalidations (304), fewer than {revalidated_at_least}: "
        "they do not test what the browser's cache does"
    )
    return met


@dataclass(frozen=True)
class Agent:
    """A scripted browser run of one task: what it does, and the verdict it should get by cache mode."""

    name: str
    task_id: int
    act: Callable[[Page, str], Any]
    """Browses from the site's base URL; returns the final response, or None for the one given to
    `run_agents`."""
    planned: dict[str, str]


def run_agents(
    proxy: ProxyProcess,
    agents: Sequence[Agent],
    base: str,
    workdir: Path,
    answer: dict[str, Any],
    *,
    prefix: str,
) -> list[Judged]:
    """Every agent once per cache mode, in a session and a browser context of its own (outputs in
    `OUT/cache-<mode>-<agent>/`, Playwright's HAR in `workdir/browser/`), finished with its own final
    response or else `answer`."""
    done = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=list(CHROMIUM_ARGS))
        try:
            for cache in CACHE_MODES:
                for agent in agents:
                    session, run = f"{prefix}-{agent.name}-{cache}", f"cache-{cache}-{agent.name}"
                    body = {"task_id": agent.task_id, "session": session, "run": run}
                    started = proxy.control.post("/sessions", body).json()
                    har = workdir / "browser" / f"{session}.har"
                    way = context_proxy(
                        cache,
                        session=session,
                        address=started.get("proxy"),
                        session_proxy_url=proxy.session_proxy_url,
                    )
                    context = browser.new_context(proxy=way, record_har_path=str(har))
                    try:
                        own = agent.act(context.new_page(), base)
                    finally:
                        context.close()  # writes the browser's HAR
                    verdict = str(proxy.control.finish(session, answer if own is None else own)["status"])
                    proxy_dir = proxy.output_dir / run / str(agent.task_id)
                    done.append(
                        Judged(session, agent.task_id, verdict, proxy_dir, har, cache, agent.planned[cache])
                    )
        finally:
            browser.close()
    return done
