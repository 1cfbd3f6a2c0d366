"""End to end against an application nobody here wrote: DokuWiki from Debian's package.

Nine tasks in WebArena-Verified format (tests/wiki/tasks.json, the wiki mapped as WebArena's
`wikipedia` site): retrieve a number, a list and a date; navigate with query parameters, some
ignored by name and some by pattern; log in and mutate through the application's own forms — its
urlencoded edit form and its multipart upload form — with non-ASCII text and a regex check of the
Cookie header; `should_not_exist`; and a NOT_FOUND_ERROR answer. A correct and a wrong scripted
Chromium agent per task run through `webarena-live serve` two sessions at a time, and each run is
judged three ways (tests/wiki/threeway.py): live, by the oracle on the proxy's run directory, and
by the oracle on Playwright's own HAR of the same run.

One wiki, one proxy and one run of all agents serve the module; the tests below only read it.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scripts.support import wiki_app as app
from tests.site.harness import ProxyProcess, free_port, oracle_dataset, start_proxy, write_config
from tests.support.paths import TESTS
from tests.wiki.agents import MAP_NAME
from tests.wiki.threeway import Run, disagreements, judge_with_oracle, load_tasks_by_id, run_all, table

TASKS_FILE = TESTS / "wiki" / "tasks.json"

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("wiki")


@pytest.fixture(scope="module")
def wiki(workdir: Path) -> Iterator[app.RunningWiki]:
    # Installed by scripts/install_test_apps.sh (bootstrap.sh runs it): a missing wiki is a
    # broken setup, never a reason to skip.
    assert app.installed(), app.INSTALL_HINT
    with app.run_dokuwiki(workdir / "dokuwiki", free_port()) as running:
        yield running


@pytest.fixture(scope="module")
def environments(wiki: app.RunningWiki) -> dict[str, dict[str, list[str]]]:
    return {"__WIKIPEDIA__": {"urls": [wiki.base_url]}}


@pytest.fixture(scope="module")
def proxy(workdir: Path, environments: dict[str, dict[str, list[str]]]) -> Iterator[ProxyProcess]:
    config = write_config(workdir / "sites.json", environments)
    running = start_proxy(workdir / "proxy", tasks=TASKS_FILE, config=config, extra_args=["--quiet"])
    yield running
    running.stop()


@pytest.fixture(scope="module")
def runs(
    proxy: ProxyProcess,
    wiki: app.RunningWiki,
    workdir: Path,
    environments: dict[str, dict[str, list[str]]],
    oracle_python: Path,
    official_dataset: Path,
) -> list[Run]:
    started = time.monotonic()
    done = asyncio.run(run_all(proxy, wiki.base_url, workdir / "browser-har"))
    browsing = time.monotonic() - started
    dataset = oracle_dataset(official_dataset, TASKS_FILE, workdir / "oracle-dataset.json")
    config = write_config(workdir / "oracle-config.json", environments, test_data_file=dataset)
    judge_with_oracle(done, oracle_python, config, workdir / "oracle")
    print(f"\nwiki suite: {len(done)} runs browsed in {browsing:.1f}s, oracle "
          f"{time.monotonic() - started - browsing:.1f}s")  # fmt: skip
    return done


def test_every_task_has_a_correct_and_a_wrong_run(runs: list[Run]) -> None:
    tasks = load_tasks_by_id(TASKS_FILE)
    assert len(tasks) >= 8
    assert sorted((run.task_id, run.kind) for run in runs) == sorted(
        (task_id, kind) for task_id in tasks for kind in ("correct", "wrong")
    )


def test_live_verdicts_are_as_planned(runs: list[Run]) -> None:
    wrong = [(run.task_id, run.kind, run.live["status"]) for run in runs if run.live["status"] != run.planned]
    assert not wrong, wrong


def test_three_way_agreement(runs: list[Run], capsys: pytest.CaptureFixture[str]) -> None:
    with capsys.disabled():
        print("\n" + table(runs, load_tasks_by_id(TASKS_FILE)))
    problems = disagreements(runs)
    assert not problems, "\n".join(problems)


def test_outputs_go_to_the_run_directories(runs: list[Run], proxy: ProxyProcess) -> None:
    for run in runs:
        written = json.loads((run.proxy_dir / "eval_result.json").read_text())
        assert written["status"] == run.live["status"], run.session
        assert run.proxy_dir == proxy.output_dir / run.kind / str(run.task_id)
    assert not (proxy.output_dir / "9201").exists()  # with a run name nothing lands in OUT/<task_id>/


def _posted(har: Path, url_ending: str) -> dict[str, Any]:
    """The one POST request of a HAR whose URL ends with `url_ending`."""
    entries = json.loads(har.read_text())["log"]["entries"]
    posts = [e["request"] for e in entries if e["request"]["url"].endswith(url_ending)]
    posts = [request for request in posts if request["method"] == "POST"]
    assert len(posts) == 1, [request["url"] for request in posts]
    request: dict[str, Any] = posts[0]
    return request


def _run(runs: list[Run], task_id: int, kind: str = "correct") -> Run:
    return next(run for run in runs if run.task_id == task_id and run.kind == kind)


def test_non_ascii_edit_form_is_captured_as_sent(runs: list[Run]) -> None:
    """The urlencoded edit form's en dash and accented letter reach the trace exactly as the browser
    sent them (its own HAR is the witness), with the logged-in session's cookies."""
    edit = _run(runs, 9206)
    ours = _posted(edit.proxy_dir / "network.har", "lakeside_path&do=edit")
    browsers = _posted(edit.browser_dir / "network.har", "lakeside_path&do=edit")
    assert ours["postData"]["text"] == browsers["postData"]["text"]
    assert "1%E2%80%9314+July" in browsers["postData"]["text"]  # the en dash, percent-encoded UTF-8
    cookies = [header["value"] for header in ours["headers"] if header["name"].lower() == "cookie"]
    assert cookies and "DokuWiki=" in cookies[0]


def test_non_ascii_multipart_upload_is_captured_as_sent(runs: list[Run]) -> None:
    """The upload form's multipart text part holds the name with its accent and en dash, decoded as
    the browser encoded it (UTF-8), in the proxy's trace as in the browser's own HAR."""
    upload = _run(runs, 9207)
    names = []
    for har in (upload.proxy_dir / "network.har", upload.browser_dir / "network.har"):
        post = _posted(har, "do=media&ns=trails")
        assert post["postData"]["mimeType"].startswith("multipart/form-data; boundary=")
        found = re.search(r'name="mediaid"\r\n\r\n(.*?)\r\n', post["postData"]["text"])
        assert found, post["postData"]["text"][:1000]
        names.append(found.group(1))
    assert names == [MAP_NAME, MAP_NAME]
