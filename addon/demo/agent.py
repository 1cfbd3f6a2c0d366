"""The demo's scripted agent: one Playwright routine per demo task (tasks/demo.json).

Each routine drives a real browser page the way a web agent would — typing in
the search box, clicking links and buttons, reading text off the page — and
returns the final response in the seed's format (`action`, `status`,
`results`). Two attempts are wrong on purpose, the way a hasty agent is wrong
(a wrong answer; a navigation one step short), so the demo shows how each kind
of failure is reported and explained.

This module knows nothing about the proxy: `demo/command.py` gives each routine a
page whose traffic already goes through its own proxy session.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from playwright.sync_api import Page

TIMEOUT_MS = 20_000
"""Upper bound for any single wait; the demo site answers in milliseconds."""

FinalResponse = dict[str, Any]


@dataclass(frozen=True)
class Attempt:
    """How the scripted agent attempts one demo task."""

    task_id: int
    approach: str
    """What the agent does, in a few words, for the verdict table."""
    act: Callable[[Page, str], FinalResponse]
    """Drives `page` from the task's rendered start URL; returns the final response."""
    fails_on_purpose: bool = False


def _search(page: Page, start_url: str, query: str) -> None:
    page.goto(start_url)
    page.get_by_role("searchbox", name="Search").fill(query)
    with page.expect_navigation():
        page.get_by_role("button", name="Search").click()


def _open_product(page: Page, name: str) -> None:
    with page.expect_navigation():
        page.locator("a.product-link", has_text=name).first.click()


def _answer(action: str, results: list[Any] | None = None) -> FinalResponse:
    return {"action": action, "status": "SUCCESS", "results": results}


def price_of_lamp(page: Page, start_url: str) -> FinalResponse:
    _search(page, start_url, "desk lamp")
    _open_product(page, "Aurora Desk Lamp")
    # The answer is the price as printed ("$34.99"); the task's currency schema
    # makes it equal to the expected number 34.99.
    return _answer("retrieve", [page.locator("#product-price").inner_text().strip()])


def list_mugs(page: Page, start_url: str) -> FinalResponse:
    _search(page, start_url, "mug")
    names = [name.strip() for name in page.locator(".results a.product-link").all_inner_texts()]
    # Alphabetical, not the page's order: the task compares the list unordered.
    return _answer("retrieve", sorted(names))


def open_cheapest_mug(page: Page, start_url: str) -> FinalResponse:
    _search(page, start_url, "mug")
    with page.expect_navigation():
        page.get_by_role("link", name="Price: low to high").click()
    with page.expect_navigation():
        page.locator(".results a.product-link").first.click()
    return _answer("navigate")


def add_backpack_to_cart(page: Page, start_url: str) -> FinalResponse:
    page.goto(start_url)
    _open_product(page, "Trailblazer Hiking Backpack 40L")
    with page.expect_navigation(url="**/checkout/cart/"):
        page.get_by_role("button", name="Add to Cart").click()
    # The cart page loads its totals with fetch(); wait until they are shown.
    page.locator("#cart-totals[data-loaded=true]").wait_for(timeout=TIMEOUT_MS)
    return _answer("mutate")


def add_lamp_to_wishlist(page: Page, start_url: str) -> FinalResponse:
    page.goto(start_url)
    _open_product(page, "Aurora Desk Lamp")
    with page.expect_response("**/rest/V1/wishlist/items"):
        page.get_by_role("button", name="Add to Wish List").click()
    page.locator(".messages .message", has_text="added to your wish list").wait_for(timeout=TIMEOUT_MS)
    return _answer("mutate")


def hasty_cheapest_backpack(page: Page, start_url: str) -> FinalResponse:
    _search(page, start_url, "backpack")
    # The mistake: trusting the first search result to be the cheapest instead
    # of sorting by price. It is the most expensive one.
    with page.expect_navigation():
        page.locator(".results a.product-link").first.click()
    return _answer("retrieve", [page.locator("#product-price").inner_text().strip()])


def backpacks_one_step_short(page: Page, start_url: str) -> FinalResponse:
    # The mistake: stopping at the search results without applying the sort
    # the task asked for, so the last page shown is not the requested one.
    _search(page, start_url, "backpack")
    return _answer("navigate")


ATTEMPTS: tuple[Attempt, ...] = (
    Attempt(1001, "searches, opens the product, reads the price", price_of_lamp),
    Attempt(1002, "searches and lists the result names", list_mugs),
    Attempt(1003, "searches, sorts by price, opens the first result", open_cheapest_mug),
    Attempt(1004, "opens the product and submits the Add to Cart form", add_backpack_to_cart),
    Attempt(1005, "clicks Add to Wish List (a fetch() JSON POST)", add_lamp_to_wishlist),
    Attempt(1006, "takes the first search result, unsorted", hasty_cheapest_backpack, fails_on_purpose=True),
    Attempt(1007, "searches, then stops without sorting", backpacks_one_step_short, fails_on_purpose=True),
)
