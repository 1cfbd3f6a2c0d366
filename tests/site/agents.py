"""Scripted agents: each drives a Playwright page through one test-site task
the way a web agent would (clicking links, filling forms) and returns the
final response it would send to the finish endpoint.

Responses deliberately mix the seed's field names (`action`/`results`) and
the dataset's (`task_type`/`retrieved_data`): the proxy accepts both.
"""

from __future__ import annotations

from typing import Any

from playwright.sync_api import Page

NAVIGATE_DONE = {"action": "navigate", "status": "SUCCESS", "results": None}
MUTATE_DONE = {"task_type": "mutate", "status": "SUCCESS", "retrieved_data": None}


def open_lantern_page(page: Page, shop: str, *, stop_short: bool = False) -> dict[str, Any]:
    """Task 9001: home -> Gear -> Trail Lantern, by clicking links."""
    page.goto(shop + "/")
    with page.expect_navigation():
        page.click("#to-gear")
    if not stop_short:
        with page.expect_navigation():
            page.click("#product-2")
        assert page.inner_text("#title") == "Trail Lantern"
    return dict(NAVIGATE_DONE)


def send_contact_message(page: Page, shop: str) -> dict[str, Any]:
    """Task 9002: an urlencoded form POST answered by a 302."""
    page.goto(shop + "/")
    with page.expect_navigation():
        page.click("#nav-contact")
    page.fill("#contact-name", "Robin Hiker")
    page.fill("#contact-email", "hiker@example.com")
    page.fill("#contact-subject", "Broken lantern")
    page.fill("#contact-message", "The handle snapped on day two.")
    with page.expect_navigation(url="**/contact/thanks"):
        page.click("#send")
    return dict(MUTATE_DONE)


def review_lantern(
    page: Page, shop: str, *, title: str = "Bright and light", photo: bytes | None = None
) -> dict[str, Any]:
    """Task 9003: a multipart form POST answered by a 302, optionally with a
    binary file part (a photo) next to the text fields the task checks."""
    page.goto(shop + "/products/2")
    with page.expect_navigation():
        page.click("#write-review")
    page.select_option("#rating", "5")
    page.fill("#review-title", title)
    page.fill("#review-body", "Lights the whole tent.")
    if photo is not None:
        page.set_input_files("#review-photo", {"name": "tent.png", "mimeType": "image/png", "buffer": photo})
    with page.expect_navigation(url="**/products/2"):
        page.click("#submit-review")
    return {"action": "MUTATE", "status": "success", "results": []}


def add_lanterns_to_cart(page: Page, shop: str) -> dict[str, Any]:
    """Task 9004: a fetch() JSON POST from the page's script."""
    page.goto(shop + "/cart")
    with page.expect_response("**/api/cart/items"):
        page.click("#add-lanterns")
    page.wait_for_function("document.getElementById('cart-status').textContent === 'items: 2'")
    return dict(MUTATE_DONE)


def read_price_and_release(page: Page, shop: str) -> dict[str, Any]:
    """Task 9005: answers in the page's formats ("$1,234.50", "March 5, 2024");
    the task expects 1234.5 and 2024-03-05, so only type-aware normalization
    makes them equal."""
    page.goto(shop + "/category/gear")
    with page.expect_navigation():
        page.click("#product-2")
    answer = {"price": page.inner_text("#price"), "released": page.inner_text("#released")}
    return {"action": "retrieve", "status": "SUCCESS", "results": [answer]}


def read_stock(page: Page, shop: str) -> dict[str, Any]:
    """Task 9006: the figure arrives through the page's JSON API call."""
    page.goto(shop + "/products/2")
    page.wait_for_function("document.getElementById('stock').textContent !== 'loading'")
    count = int(page.inner_text("#stock"))
    return {"task_type": "retrieve", "status": "SUCCESS", "retrieved_data": [count]}


def wish_for_lantern(page: Page, shop: str) -> dict[str, Any]:
    """Task 9007: form POST whose 302 sets the flash-message cookie."""
    page.goto(shop + "/products/2")
    with page.expect_navigation(url="**/wishlist"):
        page.click("#add-to-wishlist")
    assert "Trail Lantern has been added" in page.inner_text("#flash")
    return {"action": "mutate", "status": "SUCCESS", "results": None}


def open_forum_post(page: Page, forum: str, *, stop_short: bool = False) -> dict[str, Any]:
    """Task 9008 (the forum site): f/hiking -> post 7."""
    page.goto(forum + "/f/hiking")
    if not stop_short:
        with page.expect_navigation():
            page.click("#post-7")
    return dict(NAVIGATE_DONE)


def search_for_lantern(page: Page, shop: str, *, query: str = "trail lantern") -> dict[str, Any]:
    """Task 9009: a GET form; the task checks the query string."""
    page.goto(shop + "/")
    page.fill("#q", query)
    with page.expect_navigation(url="**/search?*"):
        page.click("#go")
    return dict(NAVIGATE_DONE)


def read_kettle_stock(page: Page, shop: str, *, also_wish: bool = False) -> dict[str, Any]:
    """Task 9010: read-only, and a network evaluator with `should_not_exist`
    fails the run if the wish list was changed on the way."""
    page.goto(shop + "/products/3")
    page.wait_for_function("document.getElementById('stock').textContent !== 'loading'")
    count = int(page.inner_text("#stock"))
    if also_wish:
        with page.expect_navigation(url="**/wishlist"):
            page.click("#add-to-wishlist")
    return {"action": "retrieve", "status": "SUCCESS", "results": [count]}


def revisit_lantern_page(page: Page, shop: str, *, how: str) -> dict[str, Any]:
    """Task 9001 by a run that revisits pages it saw (the browser's cache at work):

    - `reload`: home -> Gear -> Trail Lantern, then reload the answer page (a revalidation: 304);
    - `back`: ... -> Trail Lantern -> Gear again, then back to Trail Lantern, which the browser takes
      from its cache without a request when its cache is on (the proxy never sees it, and the
      browser's HAR records no navigation either: the last one is Gear);
    - `back-reload`: as `back`, then reload the answer page.
    """
    open_lantern_page(page, shop)
    if how != "reload":
        page.goto(shop + "/category/gear")
        page.go_back()
        assert page.inner_text("#title") == "Trail Lantern"
    if how != "back":
        page.reload()
        assert page.inner_text("#title") == "Trail Lantern"
    return dict(NAVIGATE_DONE)


def read_stock_after_reload(page: Page, shop: str) -> dict[str, Any]:
    """Task 9006, reading the figure again after a reload: the page's fetch() of the stock is
    revalidated (304 on the wire, the cached JSON to the page)."""
    read_stock(page, shop)
    with page.expect_response("**/api/products/2"):
        page.reload()
    return _stock_answer(page)


def _stock_answer(page: Page) -> dict[str, Any]:
    page.wait_for_function("document.getElementById('stock').textContent !== 'loading'")
    return {"task_type": "retrieve", "status": "SUCCESS", "retrieved_data": [int(page.inner_text("#stock"))]}
