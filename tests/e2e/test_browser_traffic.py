"""The browser's own traffic stays out of the traces: live, the reference on the proxy's outputs and
the reference on Playwright's own HAR agree on a run where Chromium phones home.

A real Chromium with its background networking on (and its component updater told to check at once,
`--component-updater=fast-update`, so the phantom `POST http://update.googleapis.com/...` comes
within seconds) runs the demo's scripted agent through a session's own address. The update request
reaches the proxy, which answers it itself — it is counted and listed in the session, never sent on,
its host never looked up (the suite's network guard sees every lookup and connection the proxy
makes: none beyond loopback) — and is no event: the trace, the written `network.har` and the verdict
are those of the page alone, as the reference sees them.
Debian's Firefox ESR, started by hand with a fresh profile, does the same with its captive-portal check.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests
from playwright.sync_api import sync_playwright

from tests.site.harness import CHROMIUM, oracle_dataset, oracle_verdicts, write_config
from tests.support import network_guard
from tests.support.serve_process import finish, shop, start_serve, trace_urls
from webarena_live.demo.agent import ATTEMPTS
from webarena_live.evaluator import default_tasks_path
from webarena_live.proxy.browser_traffic import is_service_host

__all__ = ["shop"]  # a fixture

pytestmark = pytest.mark.timeout(240)

TASK = 1003


def test_service_hosts_are_the_browsers_and_nothing_else() -> None:
    for host in ("update.googleapis.com", "connectivitycheck.gstatic.com", "detectportal.firefox.com",
                 "r1---sn-x.edgedl.me.gvt1.com", "UPDATE.googleapis.com."):  # fmt: skip
        assert is_service_host[host], host
    for host in ("127.0.0.1", "googleapis.com", "maps.googleapis.com", "gitlab.example", "shop.test"):
        assert not is_service_host[host], host


def test_three_way_agreement_with_the_browsers_own_traffic(
    tmp_path: Path, shop: str, oracle_python: Path, official_dataset: Path
) -> None:
    out = tmp_path / "out"
    assert network_guard.GUARD is not None
    network_guard.GUARD.take()
    served, control, _ = start_serve(tmp_path, shop, tmp_path / "state", "--output-dir", str(out))
    browser_dir = tmp_path / "browser" / str(TASK)
    browser_dir.mkdir(parents=True)
    try:
        started = requests.post(f"{control}/sessions", json={"task_id": TASK, "session": "phones-home"},
                                timeout=30).json()  # fmt: skip
        with sync_playwright() as playwright:
            args = ["--no-sandbox", "--component-updater=fast-update", f"--proxy-server={started['proxy']}",
                    "--proxy-bypass-list=<-loopback>"]  # fmt: skip
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=args)
            try:
                context = browser.new_context(record_har_path=str(browser_dir / "network.har"))
                attempt = next(a for a in ATTEMPTS if a.task_id == TASK)
                answer = attempt.act(context.new_page(), started["start_urls"][0])
                deadline = time.monotonic() + 60
                while (
                    not requests.get(f"{control}/sessions/phones-home", timeout=10)
                    .json()
                    .get("browser_requests")
                ):
                    assert time.monotonic() < deadline, "Chromium sent no request of its own in 60 s"
                    time.sleep(0.5)
                context.close()  # writes Playwright's HAR
            finally:
                browser.close()
        view = requests.get(f"{control}/sessions/phones-home", timeout=10).json()
        live = finish(control, "phones-home", answer).json()
    finally:
        served.stop()

    seen = view["browser_requests"]
    assert seen["count"] >= 1 and any("googleapis.com" in line for line in seen["recent"]), seen
    assert network_guard.GUARD.take() == []  # answered by the proxy: no lookup, no connection out
    written = json.loads((out / str(TASK) / "network.har").read_text())["log"]["entries"]
    assert written and not [e for e in written if "127.0.0.1" not in e["request"]["url"]]
    assert live["status"] == "success"

    shutil.copy2(out / str(TASK) / "agent_response.json", browser_dir / "agent_response.json")
    config = _reference_config(tmp_path, shop, official_dataset)
    on_outputs = _reference_verdict(oracle_python, config, out / str(TASK), tmp_path / "judged")
    on_browser_har = oracle_verdicts(oracle_python, browser_dir.parent, config)[TASK]["status"]
    assert (live["status"], on_outputs, on_browser_har) == ("success", "success", "success")


def _reference_config(tmp_path: Path, shop: str, official_dataset: Path) -> Path:
    dataset = oracle_dataset(official_dataset, default_tasks_path(), tmp_path / "dataset.json")
    return write_config(tmp_path / "oracle.json", {"__SHOPPING__": {"urls": [shop]}}, test_data_file=dataset)


def _reference_verdict(oracle_python: Path, config: Path, run: Path, scratch: Path) -> str:
    """The reference's verdict on the answer and HAR the proxy wrote in `run` (copied alone, so it
    judges that task only)."""
    judged = scratch / str(TASK)
    judged.mkdir(parents=True)
    for name in ("agent_response.json", "network.har"):
        shutil.copy2(run / name, judged / name)
    status: str = oracle_verdicts(oracle_python, scratch, config)[TASK]["status"]
    return status


FIREFOX = Path("/usr/bin/firefox-esr")


def _listed_host(line: str) -> str:
    """The host of a listed browser request: `METHOD URL`, or `CONNECT host:port`."""
    method, target = line.split(" ", 1)
    return target.rsplit(":", 1)[0] if method == "CONNECT" else urlsplit(target).hostname or ""


def test_firefox_own_traffic_is_kept_out_too(
    tmp_path: Path, shop: str, oracle_python: Path, official_dataset: Path
) -> None:
    """Debian's Firefox ESR with a fresh profile checks for a captive portal as it starts
    (`detectportal.firefox.com`). Driven by no framework (Playwright's Firefox is a build of its own,
    not downloadable here), it opens the mug's page through a session's address: its own requests are
    counted and listed, the trace holds the page's alone, and live and the reference on the proxy's
    outputs agree. (No third way: without Playwright there is no browser-side HAR.)"""
    assert FIREFOX.is_file(), "firefox-esr is missing: scripts/install_test_apps.sh installs it"
    out = tmp_path / "out"
    served, control, _ = start_serve(tmp_path, shop, tmp_path / "state", "--output-dir", str(out))
    try:
        started = requests.post(
            f"{control}/sessions", json={"task_id": TASK, "session": "fox"}, timeout=30
        ).json()
        port = started["proxy"].rsplit(":", 1)[1]
        profile = tmp_path / "profile"
        profile.mkdir()
        (profile / "user.js").write_text(
            "".join(
                f'user_pref("{name}", {json.dumps(value)});\n'
                for name, value in {
                    "network.proxy.type": 1,  # manual proxy settings: the session's address for all
                    "network.proxy.http": "127.0.0.1",
                    "network.proxy.http_port": int(port),
                    "network.proxy.ssl": "127.0.0.1",
                    "network.proxy.ssl_port": int(port),
                    "network.proxy.allow_hijacking_localhost": True,  # 127.0.0.1 sites through it too
                    "network.proxy.no_proxies_on": "",
                    # No first-run tabs (the privacy notice on www.mozilla.org is a page, not a service).
                    "datareporting.policy.firstRunURL": "",
                    "browser.startup.homepage_override.mstone": "ignore",
                    "startup.homepage_welcome_url": "",
                    "browser.aboutwelcome.enabled": False,
                }.items()
            )
        )
        page = f"{started['start_urls'][0]}/enamel-camp-mug.html"
        firefox = subprocess.Popen(
            [str(FIREFOX), "--headless", "--no-remote", "--profile", str(profile), page],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 90
            while True:
                view = requests.get(f"{control}/sessions/fox", timeout=10).json()
                if view.get("browser_requests") and page in trace_urls(control, "fox"):
                    break
                assert firefox.poll() is None, f"Firefox exited with {firefox.returncode}"
                assert time.monotonic() < deadline, f"Firefox sent no request of its own in 90 s: {view}"
                time.sleep(0.5)
        finally:
            os.killpg(firefox.pid, signal.SIGKILL)
            firefox.wait(timeout=30)
        urls = trace_urls(control, "fox")
        live = finish(
            control, "fox", {"task_type": "navigate", "status": "SUCCESS", "retrieved_data": None}
        ).json()
    finally:
        served.stop()
    seen = view["browser_requests"]
    assert any("detectportal.firefox.com" in line for line in seen["recent"]), seen
    assert all(is_service_host[_listed_host(line)] for line in seen["recent"]), seen
    assert urls[0] == page and all(url.startswith(shop) for url in urls), urls
    written = json.loads((out / str(TASK) / "network.har").read_text())["log"]["entries"]
    assert [e["request"]["url"] for e in written] == urls
    config = _reference_config(tmp_path, shop, official_dataset)
    on_outputs = _reference_verdict(oracle_python, config, out / str(TASK), tmp_path / "judged")
    assert (live["status"], on_outputs) == ("success", "success")
