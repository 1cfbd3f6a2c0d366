"""The guide's first terminal, run by a test: a block of docs/ that starts `webarena-live serve` (and the
demo shop), run as written in a fresh directory with its ports swapped for free ones, and the blocks a
reader types next (tests/e2e/test_readme_examples.py, tests/e2e/test_mcp_browsers.py).

A block is the fenced one right after its `<!-- example: NAME ... -->` marker in a page of docs/ (one
name, one page).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import requests

from tests.support.doc_blocks import fenced_after
from tests.support.paths import REPO

PAGES = sorted((REPO / "docs").rglob("*.md"))


def example(name: str) -> str:
    """The fenced block right after the `<!-- example: NAME ... -->` marker, in the one page holding it."""
    found = [block for page in PAGES for block in fenced_after(f"example: {name}", page.read_text())]
    assert len(found) == 1, f"{len(found)} pages of docs/ hold the example {name!r}, not one"
    return found[0]


def page_holding(text: str) -> str:
    """The one page of docs/ that holds `text`."""
    (page,) = [page for page in PAGES if text in page.read_text()]
    return page.read_text()


def this_environment(**more: str) -> dict[str, str]:
    """The environment a reader's terminal has: this one's `webarena-live` and `python` first on PATH."""
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", **more}


@dataclass(frozen=True)
class Terminal:
    """The guide's first terminal: its directory, the guide's ports by the free ones taking their place,
    and its environment."""

    workdir: Path
    ports: dict[str, str]
    env: dict[str, str]

    def swap(self, script: str) -> str:
        """`script` with each of the guide's ports replaced by its free one."""
        guide_ports = "|".join(map(re.escape, self.ports))
        return re.sub(rf"\b({guide_ports})\b", lambda m: self.ports[m.group(1)], script)


@contextmanager
def serving(terminal: Terminal, block: str) -> Iterator[None]:
    """`block` (the guide's serve block) running in the terminal, until the shop (7770) and the control
    API (8081) answer; stopped, with all it started, on leaving."""
    ports = terminal.ports
    # serve's default ports appear in the guide only implicitly: name them for the free ones.
    serve = terminal.swap(block).replace(
        "webarena-live serve ",
        f"webarena-live serve --port {ports['8080']} --control-port {ports['8081']} "
        f"--session-port {ports['8082']} --set confdir={terminal.workdir / 'conf'} ",
    )
    server = subprocess.Popen(
        ["bash", "-c", serve], cwd=terminal.workdir, env=terminal.env, start_new_session=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, server.communicate()[0]
            try:  # a person types the second block later; the test waits for the shop and the proxy
                shop = requests.get(f"http://127.0.0.1:{ports['7770']}/", timeout=1)
                if shop.ok and requests.get(f"http://127.0.0.1:{ports['8081']}/health", timeout=1).ok:
                    break
            except requests.ConnectionError:
                pass
            assert time.monotonic() < deadline, "the shop or serve did not come up"
            time.sleep(0.2)
        yield
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
