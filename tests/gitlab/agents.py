"""Agents for the GitLab-shaped site's tasks (tests/gitlab/tasks.json): each signs in by the form, opens
the issue list (whose data loads by GraphQL query POSTs) and answers; the mutating one creates an issue
by GraphQL mutation. Two kinds: real Chromium (Playwright, the page's own script sends the queries) and a
plain HTTP agent (`requests`, sending what the page's script would, Referer included).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import requests
from playwright.async_api import Page, async_playwright

from scripts.support.gitlab_app import CREATE, ISSUES_QUERY, MUTATED, NAVIGATED, PASSWORD, PROJECT, USER
from tests.site.harness import CHROMIUM, CHROMIUM_ARGS

TITLE = "Trail closed for repairs"


# --- Chromium ----------------------------------------------------------------------------------------


async def sign_in(page: Page, base: str) -> None:
    await page.goto(f"{base}/users/sign_in")
    await page.fill("#user_login", USER)
    await page.fill("#user_password", PASSWORD)
    async with page.expect_navigation():
        await page.click("#sign-in")


async def open_issues(page: Page) -> None:
    async with page.expect_navigation():
        await page.click("#issues")
    await page.wait_for_selector("body[data-loaded='1']")


async def navigate(page: Page, base: str) -> dict[str, Any]:
    await sign_in(page, base)
    await open_issues(page)
    return dict(NAVIGATED)


async def count_open(page: Page, base: str) -> dict[str, Any]:
    await sign_in(page, base)
    await open_issues(page)
    count = int(await page.inner_text("#open-count"))
    return {"task_type": "retrieve", "status": "SUCCESS", "retrieved_data": [count]}


async def create_issue(page: Page, base: str) -> dict[str, Any]:
    await sign_in(page, base)
    await open_issues(page)
    await page.fill("#title", TITLE)
    await page.click("#create")
    await page.wait_for_selector(f"#issues li:has-text('{TITLE}')")
    return dict(MUTATED)


CHROMIUM_AGENTS = {9401: navigate, 9402: count_open, 9403: create_issue}


async def run_chromium(task_id: int, proxy: str, base: str, har: Path) -> dict[str, Any]:
    """Task `task_id`'s Chromium agent through the session's own proxy address (its cache on), its own
    HAR recorded (what the official pipeline judges)."""
    har.parent.mkdir(parents=True, exist_ok=True)
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            context = await browser.new_context(proxy={"server": proxy}, record_har_path=str(har))
            answer = await CHROMIUM_AGENTS[task_id](await context.new_page(), base)
            await context.close()
        finally:
            await browser.close()
    return answer


# --- plain HTTP ----------------------------------------------------------------------------------------


def run_http(task_id: int, proxy: str, base: str) -> dict[str, Any]:
    """Task `task_id`'s plain HTTP agent through the session's own proxy address."""
    http = requests.Session()
    http.proxies = {"http": proxy}
    http.headers["Accept"] = "text/html,application/xhtml+xml"
    signed = http.post(f"{base}/users/sign_in", data={"user[login]": USER, "user[password]": PASSWORD},
                       allow_redirects=False, timeout=10)  # fmt: skip
    assert signed.status_code == 302 and signed.headers["Location"] == "/", signed.text
    assert "Projects" in http.get(f"{base}/", timeout=10).text
    page = f"{base}/{PROJECT}/-/issues/?state=opened"
    assert http.get(page, timeout=10).status_code == 200

    def graphql(body: Any) -> Any:
        headers = {"Content-Type": "application/json", "Accept": "application/json", "Referer": page}
        reply = http.post(f"{base}/api/graphql", data=json.dumps(body), headers=headers, timeout=10)
        assert reply.status_code == 200, reply.text
        return reply.json()

    variables = {"fullPath": PROJECT, "state": "opened", "labels": []}
    me = "query currentUser { currentUser { username } }"
    graphql([{"operationName": "getIssues", "query": ISSUES_QUERY, "variables": variables},
             {"operationName": "currentUser", "query": me}])  # fmt: skip
    counted = graphql(
        {"operationName": "countIssues", "query": ISSUES_QUERY, "variables": {"fullPath": PROJECT}}
    )
    if task_id == 9401:
        return dict(NAVIGATED)
    if task_id == 9402:
        count = counted["data"]["project"]["issues"]["count"]
        return {"task_type": "retrieve", "status": "SUCCESS", "retrieved_data": [count]}
    created = graphql({"operationName": "createIssue", "query": CREATE,
                       "variables": {"input": {"projectPath": PROJECT, "title": TITLE}}})  # fmt: skip
    assert created["data"]["createIssue"]["errors"] == [], created
    return dict(MUTATED)
