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
    start_proxy,
    write_config,
)
from tests.site.server import RunningSite, run_site
from tests.support.threeway import CACHE_MODES, Judged, assert_three_ways, context_proxy, judge_three_ways

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


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A module's browser runs go once per mode of its `CACHE_MODES` (default: the cache on and off)."""
    if "live_cache" in metafunc.fixturenames:
        modes = getattr(metafunc.module, "CACHE_MODES", CACHE_MODES)
        metafunc.parametrize("live_cache", modes, scope="module", ids=[f"cache-{mode}" for mode in modes])


@pytest.fixture(scope="module")
def live_cache() -> str:
    """The browser cache of the module's runs (parametrized by `pytest_generate_tests`)."""
    return "off"


@pytest.fixture(scope="module")
def live_recorder(live_workdir: Path, live_cache: str) -> FinishRecorder:
    return FinishRecorder(live_workdir / f"finishes-cache-{live_cache}", cache=live_cache)


def session_context(
    browser: Browser,
    proxy: ProxyProcess,
    session: str,
    *,
    recorder: FinishRecorder | None = None,
    **options: Any,
) -> BrowserContext:
    """A browser context whose traffic belongs to `session`.

    Without a recorder: proxy credentials on the session port (the 407 challenge). With one, in the
    recorder's cache mode (tests/support/threeway.py: the session's own address keeps the browser's
    cache on), and recording Playwright's own HAR for the three-way judgement.
    """
    options.setdefault("ignore_https_errors", True)
    cache = recorder.cache if recorder is not None else "off"
    address = proxy.control.get(f"/sessions/{session}").json().get("proxy") if cache == "on" else None
    if recorder is not None:
        options.setdefault("record_har_path", str(recorder.browser_har_for(session)))
        options.setdefault("record_har_content", "embed")
    return browser.new_context(
        proxy=context_proxy(
            cache, session=session, address=address, session_proxy_url=proxy.session_proxy_url
        ),
        **options,
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
    context = session_context(browser, proxy, session, recorder=recorder, **context_options)
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
    recorder: FinishRecorder,
    site: RunningSite,
    workdir: Path,
    oracle_python: Path,
    official_dataset: Path,
    *,
    revalidated_at_least: int = 0,
) -> dict[str, int]:
    """Every finished session judged three ways (tests/support/threeway.py): the live verdict, the
    oracle on the files the proxy wrote and the oracle on the browser's own HAR agree. Returns the
    304s met, by cache mode."""
    assert recorder.finishes, "no finished session to compare"
    dataset = oracle_dataset(official_dataset, TASKS_FILE, workdir / "oracle-dataset.json")
    config = write_config(workdir / "oracle-config.json", site.site_map(), test_data_file=dataset)
    runs = [
        Judged(finish.label, finish.task_id, finish.live_status, finish.snapshot / str(finish.task_id),
               finish.browser_har, cache=finish.cache, browser_differs=finish.browser_differs)
        for finish in recorder.finishes
    ]  # fmt: skip
    judge_three_ways(runs, oracle_python, config, workdir / f"judged-cache-{recorder.cache}")
    return assert_three_ways(runs, revalidated_at_least=revalidated_at_least)
