# ruff: noqa: RUF001, RUF003  (the en dash and other non-ASCII text are what is tested)
"""Non-ASCII form posts, live: real Chromium, a real `webarena-live serve`, and the browser's own HAR.

Chromium browses `tests/site/charsets.py` through the proxy while Playwright records the HAR of the
same context (`record_har`), and submits an en dash, accented letters, CJK and an emoji through an
urlencoded form, a multipart form (without and with a file part), a `text/plain` form and `fetch()`
bodies — from a UTF-8 page, a windows-1252 page and a Shift_JIS page. Then:

- every POST the proxy captured equals what the browser's HAR recorded for it (`postData.text` and
  `mimeType`) where the bytes are UTF-8, and gives back the exact bytes the site received always;
- the oracle's verdicts on the proxy's `network.har` and on the browser's HAR match each other and
  the live verdict.

Measured on the way (docs/notes/live-findings.md): with a proxy set on the context, Playwright's HAR
has the body of a form with a file part; without one (the official harness) it has no postData.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from tests.site.charsets import FIELDS, UPLOAD, CharsetSite, run_charset_site
from tests.site.harness import (
    CHROMIUM,
    CHROMIUM_ARGS,
    ProxyProcess,
    oracle_dataset,
    oracle_verdicts,
    start_proxy,
    write_config,
)

pytestmark = pytest.mark.timeout(300)

RESPONSE = {"task_type": "MUTATE", "status": "SUCCESS", "retrieved_data": None}


def _task(task_id: int, path: str, post_data: dict[str, str]) -> dict[str, Any]:
    return {
        "sites": ["shopping"],
        "task_id": task_id,
        "intent_template_id": task_id,
        "start_urls": ["__SHOPPING__/page/utf-8"],
        "intent": f"Send the form at {path}",
        "intent_template": "Send the form at {{path}}",
        "instantiation_dict": {"path": path},
        "revision": 1,
        "eval": [
            {
                "evaluator": "AgentResponseEvaluator",
                "results_schema": {"type": "null"},
                "expected": {"task_type": "mutate", "status": "SUCCESS", "retrieved_data": None},
            },
            {
                "evaluator": "NetworkEventEvaluator",
                "expected": {
                    "url": f"__SHOPPING__{path}",
                    "http_method": "POST",
                    "response_status": 200,
                    "post_data": post_data,
                },
            },
        ],
    }


JSON_FIELDS = {f"$.{name}": value for name, value in FIELDS.items()}

TASKS = [
    _task(9701, "/submit/utf-8/urlencoded", FIELDS),
    _task(9702, "/submit/utf-8/multipart", FIELDS),
    _task(9703, "/submit/utf-8/upload", FIELDS),
    _task(9704, "/api/utf-8/json", JSON_FIELDS),
    _task(9705, "/submit/windows-1252/multipart", {"message": FIELDS["message"]}),
    _task(9706, "/submit/shift_jis/plain", {"city": FIELDS["city"]}),
]

EXPECTED = {
    # task: (live, oracle on the proxy's HAR, oracle on the browser's HAR)
    9701: ("success", "success", "success"),
    9702: ("success", "success", "success"),
    # The file part is binary: both HARs hold it undecoded, the text parts read the same.
    9703: ("success", "success", "success"),
    9704: ("success", "success", "success"),
    # A windows-1252 page sends 0x96 for the en dash; both HARs hold no "–" (see live-findings).
    9705: ("failure", "failure", "failure"),
    # The reference parses no text/plain body: such a task can never pass, on either HAR.
    9706: ("failure", "failure", "failure"),
}


def submit_form(page: Page, site: CharsetSite, charset: str, kind: str) -> None:
    page.goto(f"{site.base}/page/{charset}")
    for name, value in FIELDS.items():
        page.fill(f"#{kind}-{name}", value)
    if kind == "upload":
        upload = {"name": "p.bin", "mimeType": "application/octet-stream", "buffer": UPLOAD}
        page.set_input_files("#upload-file", files=[upload])
    with page.expect_navigation():
        page.click(f"#{kind}-send")


def post_json(page: Page, path: str, content_type: str) -> None:
    page.evaluate(
        """([path, type, fields]) => fetch(path, {method: 'POST', headers: {'Content-Type': type},
                                                  body: JSON.stringify(fields)}).then(r => r.text())""",
        [path, content_type, FIELDS],
    )


def every_kind(charset: str) -> Callable[[Page, CharsetSite], None]:
    def agent(page: Page, site: CharsetSite) -> None:
        for kind in ("urlencoded", "multipart", "upload", "plain"):
            submit_form(page, site, charset, kind)
        page.goto(f"{site.base}/page/{charset}")
        post_json(page, f"/api/{charset}/json", "application/json")
        post_json(page, f"/api/{charset}/json-latin1", "application/json; charset=iso-8859-1")

    return agent


def one_form(kind: str) -> Callable[[Page, CharsetSite], None]:
    return lambda page, site: submit_form(page, site, "utf-8", kind)


def json_posts(page: Page, site: CharsetSite) -> None:
    submit_form(page, site, "utf-8", "plain")
    page.goto(f"{site.base}/page/utf-8")
    post_json(page, "/api/utf-8/json", "application/json")
    post_json(page, "/api/utf-8/json-latin1", "application/json; charset=iso-8859-1")


RUNS: dict[int, Callable[[Page, CharsetSite], None]] = {
    9701: one_form("urlencoded"),
    9702: one_form("multipart"),
    9703: one_form("upload"),
    9704: json_posts,
    9705: every_kind("windows-1252"),
    9706: every_kind("shift_jis"),
}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("form-charsets")


@pytest.fixture(scope="module")
def site() -> Iterator[CharsetSite]:
    with run_charset_site() as running:
        yield running


@pytest.fixture(scope="module")
def tasks_file(workdir: Path) -> Path:
    path = workdir / "tasks.json"
    path.write_text(json.dumps(TASKS, ensure_ascii=False, indent=1))
    return path


@pytest.fixture(scope="module")
def proxy(workdir: Path, site: CharsetSite, tasks_file: Path) -> Iterator[ProxyProcess]:
    config = write_config(workdir / "sites.json", {"__SHOPPING__": {"urls": [site.base]}})
    running = start_proxy(workdir / "proxy", tasks=tasks_file, config=config)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=list(CHROMIUM_ARGS))
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def runs(
    workdir: Path, site: CharsetSite, proxy: ProxyProcess, browser: Browser
) -> dict[int, dict[str, Any]]:
    """Each task run once: live verdicts; the proxy's and the browser's files in `proxy/` and `browser/`."""
    live: dict[int, dict[str, Any]] = {}
    for task_id, agent in RUNS.items():
        session = f"charsets-{task_id}"
        proxy.control.start(task_id, session)
        browser_dir = workdir / "browser" / str(task_id)
        browser_dir.mkdir(parents=True)
        context = browser.new_context(
            proxy={"server": proxy.session_proxy_url, "username": session, "password": "x"},
            record_har_path=str(browser_dir / "network.har"),
        )
        try:
            agent(context.new_page(), site)
        finally:
            context.close()  # writes the browser's HAR
        (browser_dir / "agent_response.json").write_text(json.dumps(RESPONSE))
        live[task_id] = proxy.control.finish(session, RESPONSE)
        proxy_dir = workdir / "proxy-runs" / str(task_id)
        proxy_dir.mkdir(parents=True)
        for name in ("agent_response.json", "network.har"):
            shutil.copy2(proxy.output_dir / str(task_id) / name, proxy_dir / name)
    return live


def posts(har: Path, base: str) -> dict[str, dict[str, Any]]:
    """The HAR's POST requests by path (each path is posted once per run)."""
    entries = json.loads(har.read_text())["log"]["entries"]
    found = {}
    for entry in entries:
        request = entry["request"]
        if request["method"] == "POST" and request["url"].startswith(base):
            path = request["url"].removeprefix(base)
            assert path not in found, f"{path} posted twice"
            found[path] = request
    return found


def test_captured_post_data_equals_the_browser_har_and_keeps_the_bytes(
    workdir: Path, site: CharsetSite, runs: dict[int, dict[str, Any]]
) -> None:
    compared: list[tuple[str, str]] = []
    for task_id in RUNS:
        ours = posts(workdir / "proxy-runs" / str(task_id) / "network.har", site.base)
        theirs = posts(workdir / "browser" / str(task_id) / "network.har", site.base)
        assert set(ours) == set(theirs) and ours, (task_id, sorted(ours), sorted(theirs))
        for path, request in ours.items():
            sent = site.posted(path)
            text, mime = request["postData"]["text"], request["postData"]["mimeType"]
            assert mime == sent.content_type, path
            # The exact bytes the site received, whatever their charset.
            assert text.encode("utf-8", "surrogateescape") == sent.body, path
            assert request["bodySize"] == len(sent.body), path
            browser_post = theirs[path].get("postData")
            assert browser_post is not None, path  # (without a proxy, a form with a file part has none)
            assert browser_post["mimeType"] == mime, path
            try:
                sent.body.decode("utf-8")
            except UnicodeDecodeError:
                # Another page's charset: the browser's HAR has U+FFFD where we keep the bytes.
                assert "\ufffd" in browser_post["text"], path
                replaced = text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
                assert replaced == browser_post["text"], path
                compared.append((path, "bytes kept; browser HAR has U+FFFD"))
            else:
                assert text == browser_post["text"], path
                compared.append((path, "equal"))
    print("\n" + "\n".join(f"{path:40} {how}" for path, how in compared))
    # 11 bodies of UTF-8 (every form of the UTF-8 page but the upload, every script body, the ASCII
    # urlencoded forms of the other pages) are equal; 7 are not UTF-8 (the upload's file, the other
    # pages' multipart, upload and text/plain forms) and read the same once undecodable bytes are U+FFFD.
    assert [how for _, how in compared].count("equal") == 11 and len(compared) == 18


def test_what_chromium_sends_for_each_charset(site: CharsetSite, runs: dict[int, dict[str, Any]]) -> None:
    """The measured facts docs/notes/live-findings.md states (and capture relies on)."""
    utf8 = site.posted("/submit/utf-8/multipart")
    assert "charset" not in utf8.content_type and "six entries – see the table".encode() in utf8.body
    cp1252 = site.posted("/submit/windows-1252/multipart")
    assert "charset" not in cp1252.content_type
    assert b"six entries \x96 see the table" in cp1252.body and b"&#26481;&#20140;" in cp1252.body
    assert b"message=six+entries+%96+see" in site.posted("/submit/windows-1252/urlencoded").body
    assert b"city=%26%2326481%3B" in site.posted("/submit/windows-1252/urlencoded").body
    sjis = site.posted("/submit/shift_jis/plain")
    assert sjis.content_type == "text/plain" and "city=東京タワー".encode("cp932") in sjis.body
    assert b"six entries &#8211; see" in sjis.body
    for charset in ("utf-8", "windows-1252", "shift_jis"):
        # A script's string body is UTF-8 whatever the page's charset and the declared one.
        declared = site.posted(f"/api/{charset}/json-latin1")
        assert declared.content_type == "application/json; charset=iso-8859-1"
        assert json.loads(declared.body.decode("utf-8")) == FIELDS


def test_verdicts_of_both_hars_match_each_other_and_the_live_verdict(
    workdir: Path,
    site: CharsetSite,
    runs: dict[int, dict[str, Any]],
    tasks_file: Path,
    oracle_python: Path,
    official_dataset: Path,
) -> None:
    dataset = oracle_dataset(official_dataset, tasks_file, workdir / "oracle-dataset.json")
    config = write_config(
        workdir / "oracle-config.json", {"__SHOPPING__": {"urls": [site.base]}}, test_data_file=dataset
    )
    on_proxy = oracle_verdicts(oracle_python, workdir / "proxy-runs", config)
    on_browser = oracle_verdicts(oracle_python, workdir / "browser", config)
    table = {
        task_id: (runs[task_id]["status"], on_proxy[task_id]["status"], on_browser[task_id]["status"])
        for task_id in RUNS
    }
    print("\ntask  live / oracle on the proxy's HAR / oracle on the browser's HAR")
    print("\n".join(f"{task_id}  {' / '.join(row)}" for task_id, row in table.items()))
    assert table == EXPECTED
