"""Several copies of the seeded DokuWiki, each a complete deployment with its own data directory and a
reset endpoint in the environment-control shape that really restores the seeded pages — the replicas
of the pool tests (tests/e2e/test_replica_pools.py).

And the task mix that shows why replicas matter: 9301 (mutate) changes the Ridge Loop's length, which
9201 (retrieve, from tests/wiki/tasks.json) reads. Run side by side on one copy, the change decides
the reader's verdict.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests
from playwright.async_api import Page

from scripts.support import wiki_app as app
from scripts.support.reset_endpoint import ResetEndpoint, reset_endpoints
from tests.site.harness import free_port
from tests.wiki.agents import MUTATED, Wiki, log_in, open_page, ridge_length

POOL_TASKS = (9201, 9301)
NEW_LENGTH = "13.5 km"
RIDGE = "trails:ridge_loop"
# The change 9301 asks for; the network evaluator checks the saved text (any page edit's form).
TASK_9301 = {
    "sites": ["wikipedia"],
    "task_id": 9301,
    "intent_template_id": 9701,
    "start_urls": ["__WIKIPEDIA__/doku.php?id=start"],
    "intent": f"Log in as ranger and change the length of the Ridge Loop trail to {NEW_LENGTH}",
    "intent_template": "Log in as {{user}} and change the length of the {{trail}} trail to {{length}}",
    "instantiation_dict": {"user": "ranger", "trail": "Ridge Loop", "length": NEW_LENGTH},
    "eval": [
        {
            "evaluator": "AgentResponseEvaluator",
            "results_schema": {"type": "null"},
            "expected": {"task_type": "mutate", "status": "SUCCESS", "retrieved_data": None},
        },
        {
            "evaluator": "NetworkEventEvaluator",
            "expected": {
                "url": f"__WIKIPEDIA__/doku.php?id={RIDGE}&do=edit",
                "http_method": "POST",
                "response_status": 302,
                "post_data": {"do[save]": "1", "wikitext": f"^.*Length *\\| *{NEW_LENGTH}.*$"},
            },
        },
    ],
    "revision": 1,
}


def write_pool_tasks(path: Path) -> Path:
    """9201 as tests/wiki/tasks.json has it, and 9301."""
    tasks = json.loads((Path(__file__).parent / "tasks.json").read_text())
    path.write_text(json.dumps([*(t for t in tasks if t["task_id"] == 9201), TASK_9301], indent=1))
    return path


async def change_ridge_length(page: Page, wiki: Wiki) -> dict[str, Any]:
    """9301's agent: log in, open the Ridge Loop's editor, change its length, save."""
    await log_in(page, wiki, RIDGE)
    async with page.expect_navigation():
        await page.click("#dokuwiki__pagetools li.edit a")
    text = await page.input_value("#wiki__text")
    assert "12.5 km" in text, text
    await page.fill("#wiki__text", text.replace("12.5 km", NEW_LENGTH))
    await page.fill("#edit__summary", "new survey")
    async with page.expect_navigation():
        await page.click("#edbtn__save")
    await open_page(page, wiki, RIDGE)
    return dict(MUTATED)


AGENTS = {9201: ridge_length, 9301: change_ridge_length}


@dataclass
class Replica:
    wiki: app.RunningWiki
    reset: ResetEndpoint

    @property
    def url(self) -> str:
        return self.wiki.base_url

    def length(self) -> str:
        """What the Ridge Loop's page says now (read straight from the copy, around any proxy)."""
        text = requests.get(f"{self.url}/doku.php?id={RIDGE}&do=export_raw", timeout=10).text
        line = next(line for line in text.splitlines() if "Length" in line)
        return line.split("|")[1].strip()


def restore(wiki: app.RunningWiki) -> None:
    """Back to the seeded wiki: the seeded pages, no history, no caches; every page parsed once again
    (see `app.render_every_page_once`)."""
    data = wiki.root / "data"
    for name in ("pages", "attic", "meta", "cache", "locks"):
        shutil.rmtree(data / name, ignore_errors=True)
        (data / name).mkdir()
    shutil.copytree(app.PAGES, data / "pages", dirs_exist_ok=True)
    past = time.time() - 3600
    for page in (data / "pages").rglob("*.txt"):
        os.utime(page, (past, past))
    app.render_every_page_once(wiki)


@contextmanager
def wiki_replicas(root: Path, count: int, *, reset_delay: float = 0.0) -> Iterator[list[Replica]]:
    """`count` seeded copies of DokuWiki, each on its own port with its own reset endpoint."""
    assert app.installed(), app.INSTALL_HINT
    with ExitStack() as stack, reset_endpoints(count, delay=reset_delay) as endpoints:
        replicas = []
        for index, endpoint in enumerate(endpoints):
            wiki = stack.enter_context(app.run_dokuwiki(root / f"copy-{index}", free_port()))
            endpoint.on_reset = lambda wiki=wiki: restore(wiki)
            replicas.append(Replica(wiki, endpoint))
        yield replicas


def pool_config(replicas: list[Replica]) -> dict[str, Any]:
    """The site map: one site, these copies as its replicas."""
    return {"__WIKIPEDIA__": {"replicas": [{"urls": [r.url], "reset_url": r.reset.url} for r in replicas]}}
