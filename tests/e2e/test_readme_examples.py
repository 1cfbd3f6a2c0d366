"""The documentation's agents run as written: the demo shop and `webarena-live serve` as the guide's
first block starts them, then each recipe — curl with credentials, curl through a session address,
Python with the project's client, Playwright, Selenium (Debian's chromedriver) and Puppeteer
(`puppeteer-core` from npm) — against them, each with its verdict checked.

A block is the fenced one right after its `<!-- example: NAME ... -->` marker in a page of docs/ (the guide
"Evaluate an agent in any language" holds them all; one name, one page: tests/support/guide_serve.py).
The README's short example is the same blocks (tests/test_docs.py checks it). Its ports are swapped for
free ones and it runs in a fresh directory, with `webarena-live` and `python` of this environment first
on PATH. The tests run as whatever user CI is (root there), as a reader would.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.support.guide_serve import Terminal, example, page_holding, serving, this_environment
from webarena_live.launch import free_ports

PORTS = ("7770", "8080", "8081", "8082")

pytestmark = pytest.mark.timeout(300)


class Demo(Terminal):
    """The guide's first terminal, running the demo shop and serve."""

    def run(self, command: list[str], script: str, suffix: str, timeout: float = 120) -> str:
        """`command FILE` on the block saved (ports swapped) in the demo's directory: what it printed."""
        path = self.workdir / f"{command[0].rsplit('/', 1)[-1]}-{len(list(self.workdir.iterdir()))}{suffix}"
        path.write_text(self.swap(script))
        done = subprocess.run(
            [*command, str(path)], cwd=self.workdir, env=self.env, capture_output=True, text=True,
            timeout=timeout,
        )  # fmt: skip
        assert done.returncode == 0, f"{path.name} failed:\n{done.stdout}\n{done.stderr}"
        return done.stdout


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    ports = dict(zip(PORTS, map(str, free_ports(len(PORTS))), strict=True))
    demo = Demo(tmp_path_factory.mktemp("readme"), ports, this_environment())
    with serving(demo, example("serve-demo-shop")):
        yield demo


def _verdict_line(output: str) -> str:
    return output.strip().splitlines()[-1]


def test_readme_curl_session_runs_as_written(demo: Demo) -> None:
    output = demo.run(["bash", "-euo", "pipefail"], example("curl-session"), ".sh", timeout=60)
    started, result, listing = _split_outputs(output)
    assert json.loads(started)["task_id"] == 1003
    verdict = json.loads(result)
    assert verdict["status"] == "success" and verdict["score"] == 1, json.dumps(verdict)[:3000]
    assert listing.split() == ["agent_response.json", "attempt.json", "eval_result.json", "network.har"]


def test_readme_session_address_runs_as_written(demo: Demo) -> None:
    output = demo.run(["bash", "-euo", "pipefail"], example("session-address"), ".sh", timeout=60)
    verdict = json.loads(output)
    assert (verdict["task_id"], verdict["status"], verdict["score"]) == (1003, "success", 1), output[:3000]


@pytest.mark.parametrize("name", ["python-client", "playwright", "selenium"])
def test_readme_python_recipes_run_as_written(demo: Demo, name: str) -> None:
    session = f"{name.split('-')[0]}-1"
    assert _verdict_line(demo.run([sys.executable], example(name), ".py")) == "success 1.0"
    assert _files_of(demo, session) == [
        "agent_response.json",
        "attempt.json",
        "eval_result.json",
        "network.har",
    ]


def test_readme_puppeteer_recipe_runs_as_written(demo: Demo) -> None:
    install = re.search(r"`(npm install puppeteer-core@[\w.]+)`", page_holding("<!-- example: puppeteer "))
    assert install, "the Puppeteer recipe's page names no puppeteer-core version to install"
    node, npm = shutil.which("node"), shutil.which("npm")
    assert node and npm, "Node and npm are missing: scripts/install_test_apps.sh installs them"
    subprocess.run(
        [npm, *install.group(1).split()[1:], "--no-audit", "--no-fund", "--loglevel=error"],
        cwd=demo.workdir, env=demo.env, check=True, capture_output=True, timeout=240,
    )  # fmt: skip
    assert _verdict_line(demo.run([node], example("puppeteer"), ".js")) == "success 1"
    assert _files_of(demo, "puppeteer-1") == [
        "agent_response.json",
        "attempt.json",
        "eval_result.json",
        "network.har",
    ]


def _files_of(demo: Demo, session: str) -> list[str]:
    """The files the session's finish wrote, where they are now (a later finish of the same task moves
    an earlier attempt aside)."""
    control = f"http://127.0.0.1:{demo.ports['8081']}"
    outputs = requests.get(f"{control}/sessions/{session}", timeout=10).json()["outputs"]
    return sorted(Path(path).name for path in outputs.values() if Path(path).is_file())


def _split_outputs(stdout: str) -> tuple[str, str, str]:
    """The start answer, the finish answer (JSON documents) and the `ls` listing, in that order."""
    decoder = json.JSONDecoder()
    started, end = decoder.raw_decode(stdout)
    rest = stdout[end:].lstrip()
    result, end = decoder.raw_decode(rest)
    return json.dumps(started), json.dumps(result), rest[end:]
