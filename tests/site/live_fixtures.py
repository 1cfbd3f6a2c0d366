"""Pytest fixtures and helpers of the live end-to-end tests.

Test modules load this file with `pytest_plugins = ["tests.site.live_fixtures"]`.
The fixtures are module-scoped: each test module gets one test site, one
`webarena-live serve` process and one headless Chromium, shared by its tests
(starting them per test would make the suite several times slower).

HTTPS trust: the browser contexts are made with `ignore_https_errors=True`
rather than importing mitmproxy's CA into an NSS database (Chromium started
by Playwright uses a fresh profile per run). One test instead starts Chromium
with `--ignore-certificate-errors-spki-list=<pin of mitmproxy's CA>` and
verifies certificates for real (`harness.ca_spki_pin`). The proxy itself is
started with `--set ssl_insecure=true` because the test site's certificate
is self-signed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, sync_playwright

from tests.site.harness import (
    CHROMIUM,
    CHROMIUM_ARGS,
    TASKS_FILE,
    FinishRecorder,
    ProxyProcess,
    oracle_dataset,
    oracle_verdicts,
    start_proxy,
    write_config,
)
from tests.site.server import RunningSite, run_site

Agent = Callable[[Page], dict[str, Any]]

# The test site's HTTPS certificate is self-signed: mitmproxy must not verify upstream.
DEFAULT_PROXY_OPTIONS = ("ssl_insecure=true",)


@pytest.fixture(scope="module")
def live_workdir(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Path:
    return tmp_path_factory.mktemp(request.module.__name__.rpartition(".")[2])


@pytest.fixture(scope="module")
def live_site(live_workdir: Path) -> Iterator[RunningSite]:
    with run_site(live_workdir / "site") as running:
        yield running


@pytest.fixture(scope="module")
def live_proxy(
    live_workdir: Path, live_site: RunningSite, request: pytest.FixtureRequest
) -> Iterator[ProxyProcess]:
    """The module's proxy; a module may set `PROXY_OPTIONS` (mitmproxy `--set` values)."""
    config = write_config(live_workdir / "sites.json", live_site.site_map())
    options = getattr(request.module, "PROXY_OPTIONS", DEFAULT_PROXY_OPTIONS)
    running = start_proxy(live_workdir / "proxy", tasks=TASKS_FILE, config=config, extra_options=options)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def live_browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=list(CHROMIUM_ARGS))
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def live_recorder(live_workdir: Path) -> FinishRecorder:
    return FinishRecorder(live_workdir / "finishes")


def session_context(browser: Browser, proxy: ProxyProcess, session: str, **options: Any) -> BrowserContext:
    """A browser context whose traffic belongs to `session` (session port, 407 challenge)."""
    options.setdefault("ignore_https_errors", True)
    return browser.new_context(
        proxy={"server": proxy.session_proxy_url, "username": session, "password": "x"}, **options
    )


def run_task(
    proxy: ProxyProcess,
    browser: Browser,
    recorder: FinishRecorder,
    *,
    task_id: int,
    session: str,
    agent: Agent,
    **context_options: Any,
) -> dict[str, Any]:
    """Start a session, let the agent browse as that session, post its answer."""
    started = proxy.control.start(task_id, session)
    assert started["session"] == session
    assert started["task_id"] == task_id
    context = session_context(browser, proxy, session, **context_options)
    try:
        response = agent(context.new_page())
    finally:
        context.close()
    result = proxy.control.finish(session, response)
    recorder.record(session, proxy.output_dir, task_id, result)
    return result


def evaluator_statuses(result: dict[str, Any]) -> dict[str, list[str]]:
    statuses: dict[str, list[str]] = {}
    for item in result["evaluators_results"]:
        statuses.setdefault(item["evaluator_name"], []).append(item["status"])
    return statuses


def assert_verdict(result: dict[str, Any], status: str, *, task_id: int) -> None:
    assert result["task_id"] == task_id
    assert result["status"] == status, json.dumps(result, indent=1)[:4000]
    assert result["score"] == (1.0 if status == "success" else 0.0)


def assert_oracle_agrees(
    recorder: FinishRecorder, site: RunningSite, workdir: Path, oracle_python: Path, official_dataset: Path
) -> None:
    """The oracle, run on each finished session's written files, gives the live verdict."""
    assert recorder.finishes, "no finished session to compare"
    dataset = oracle_dataset(official_dataset, TASKS_FILE, workdir / "oracle-dataset.json")
    config = write_config(workdir / "oracle-config.json", site.site_map(), test_data_file=dataset)
    snapshots = sorted({finish.snapshot for finish in recorder.finishes})
    # One oracle process per snapshot directory, run side by side: each spends
    # most of its time loading the 812-task dataset.
    with ThreadPoolExecutor(max_workers=4) as pool:
        judged = pool.map(lambda snapshot: oracle_verdicts(oracle_python, snapshot, config), snapshots)
        verdicts = dict(zip(snapshots, judged, strict=True))
    disagreements = []
    for finish in recorder.finishes:
        oracle_status = verdicts[finish.snapshot].get(finish.task_id, {}).get("status")
        if oracle_status != finish.live_status:
            disagreements.append((finish.label, finish.task_id, finish.live_status, oracle_status))
    assert not disagreements, f"(session, task, live, oracle): {disagreements}"
