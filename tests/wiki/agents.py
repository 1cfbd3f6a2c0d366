"""Scripted agents for the DokuWiki tasks (tests/wiki/tasks.json): for every task a correct one and
a wrong one, each driving a Playwright page the way a web agent would (links, the search box, the
login, edit and upload forms) and returning the final response it posts to the finish endpoint.

Each wrong agent makes one mistake an agent could plausibly make, so its failure is caused by that
mistake alone: the wrong table row, the wrong namespace, Preview pressed instead of Save, a change
it was told not to make, the wrong error for a page that does not exist. (Not a plain hyphen for
an en dash: the reference folds text to ASCII before comparing, so it cannot tell them apart.)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from playwright.async_api import Page

from scripts.support.wiki_app import PASSWORD, USER

# Written with escapes so the en dash (U+2013) and the accented e (U+00E9) are visible as such.
NOTICE = "Bridge closed 1\u201314 July; the caf\u00e9 stays open"
MAP_NAME = "Lakeside caf\u00e9 \u2013 map.png"
# The smallest PNG: the upload is checked by its form fields, the bytes only need to be an image.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d4944415478da63f8cfc0f01f0005000201a7cd0e3a0000000049454e44ae426082"
)
NAVIGATED = {"task_type": "navigate", "status": "SUCCESS", "retrieved_data": None}
MUTATED = {"task_type": "mutate", "status": "SUCCESS", "retrieved_data": None}


@dataclass(frozen=True)
class Wiki:
    """What an agent knows besides its page: where the wiki is."""

    base: str


Agent = Callable[[Page, Wiki], Awaitable[dict[str, Any]]]


def retrieved(*values: Any) -> dict[str, Any]:
    return {"task_type": "retrieve", "status": "SUCCESS", "retrieved_data": list(values)}


# -- moves every agent makes ---------------------------------------------------


async def open_page(page: Page, wiki: Wiki, page_id: str) -> None:
    # Agents open most pages by address rather than by clicking through from the start page: every
    # page view costs several requests (the page, its styles and scripts) and the suite must stay quick.
    # A page that comes back as a server error is opened again, as an agent would: PHP's built-in
    # server can drop a connection when CI loads the machine (every judge sees both views).
    for attempt in range(3):
        reply = await page.goto(f"{wiki.base}/doku.php?id={page_id}")
        if reply is None or reply.status < 500:
            await reload_if_blank(page)
            return
        await page.wait_for_timeout(500 * (attempt + 1))
    raise AssertionError(f"{page_id}: {reply.status} three times: {(await page.inner_text('body'))[:500]}")


async def reload_if_blank(page: Page) -> None:
    """Load a page shown without its text once more, as an agent would. DokuWiki writes its caches
    in place, so a view that reads one while an edit rewrites it shows the page frame with nothing
    in it (scripts/support/wiki_app.py renders every seeded page once beforehand; an edit renders again)."""
    for attempt in range(2):
        if (await page.inner_text("#dokuwiki__content div.page")).strip():
            return
        if attempt:
            raise AssertionError(f"{page.url} shown without its text twice")
        print(f"wiki agent: {page.url} shown without its text, loading it again")
        await page.reload()


async def open_start(page: Page, wiki: Wiki) -> None:
    await open_page(page, wiki, "start")


async def follow(page: Page, link_text: str) -> None:
    """Click the link of the page's content named `link_text`."""
    link = page.locator(f"#dokuwiki__content a:text-is('{link_text}')")
    await link.wait_for(timeout=10_000)
    async with page.expect_navigation():
        await link.click()
    await reload_if_blank(page)


async def field_value(page: Page, name: str) -> str:
    """The value cell next to a row heading of the page's fact table ("Length" -> "12.5 km")."""
    return (await page.inner_text(f"#dokuwiki__content th:text-is('{name}') + td")).strip()


def number(text: str) -> float:
    return float(text.split()[0])


async def search(page: Page, query: str) -> None:
    await page.fill("#qsearch__in", query)
    async with page.expect_navigation():
        await page.press("#qsearch__in", "Enter")


async def log_in(page: Page, wiki: Wiki, page_id: str = "start") -> None:
    """Log in from `page_id`'s login link; DokuWiki then shows that page again."""
    await open_page(page, wiki, page_id)
    async with page.expect_navigation():
        await page.click("#dokuwiki__usertools li.action.login a")
    await page.fill("#dw__login input[name=u]", USER)
    await page.fill("#dw__login input[name=p]", PASSWORD)
    async with page.expect_navigation():
        await page.click("#dw__login button[type=submit]")
    assert await page.locator("#dokuwiki__usertools li.action.logout").count() == 1, "login failed"


async def edit_page(page: Page, notice: str, *, button: str = "#edbtn__save") -> None:
    """On the page shown, add `notice` as a bullet, give it as the edit summary and press `button`
    (Save, or Preview, which changes nothing)."""
    async with page.expect_navigation():
        await page.click("#dokuwiki__pagetools li.edit a")
    text = await page.input_value("#wiki__text")
    await page.fill("#wiki__text", text.rstrip("\n") + f"\n  * {notice}\n")
    await page.fill("#edit__summary", notice)
    async with page.expect_navigation():
        await page.click(button)


# -- 9201 a number -------------------------------------------------------------


async def ridge_length(page: Page, wiki: Wiki) -> dict[str, Any]:
    await open_page(page, wiki, "trails:ridge_loop")
    return retrieved(number(await field_value(page, "Length")))


async def ridge_length_wrong_row(page: Page, wiki: Wiki) -> dict[str, Any]:
    await open_page(page, wiki, "trails:ridge_loop")
    return retrieved(number(await field_value(page, "Elevation gain")))


# -- 9202 a list ---------------------------------------------------------------


async def _hard_trails(page: Page, wiki: Wiki) -> list[str]:
    await open_start(page, wiki)
    await follow(page, "All trails")
    rows = page.locator("#dokuwiki__content table tr")
    names = []
    for index in range(await rows.count()):
        cells = [text.strip() for text in await rows.nth(index).locator("td").all_inner_texts()]
        if len(cells) == 3 and cells[1] == "hard":
            names.append(cells[0])
    return names


async def hard_trails(page: Page, wiki: Wiki) -> dict[str, Any]:
    return retrieved(*await _hard_trails(page, wiki))


async def hard_trails_first_two(page: Page, wiki: Wiki) -> dict[str, Any]:
    return retrieved(*(await _hard_trails(page, wiki))[:2])


# -- 9203 a date ---------------------------------------------------------------


async def lakeside_opened(page: Page, wiki: Wiki) -> dict[str, Any]:
    await open_start(page, wiki)
    await follow(page, "Lakeside Path")
    return retrieved(await field_value(page, "Opened"))  # "June 14, 2023", as the page says it


async def lakeside_opened_wrong_trail(page: Page, wiki: Wiki) -> dict[str, Any]:
    await open_page(page, wiki, "trails:ridge_loop")
    return retrieved(await field_value(page, "Opened"))


# -- 9204 navigate: search (query parameters, `id` ignored) -------------------


async def search_falcon_crag(page: Page, wiki: Wiki) -> dict[str, Any]:
    await open_start(page, wiki)
    await search(page, "falcon crag")
    assert "Falcon Crag Scramble" in await page.inner_text("#dokuwiki__content")
    return dict(NAVIGATED)


async def search_falcon_only(page: Page, wiki: Wiki) -> dict[str, Any]:
    await open_start(page, wiki)
    await search(page, "falcon")
    return dict(NAVIGATED)


# -- 9205 navigate: media manager (`id` and `tab_*` ignored by pattern) -------


async def media_manager_trails(page: Page, wiki: Wiki) -> dict[str, Any]:
    await open_page(page, wiki, "trails:ridge_loop")  # the site tools' link opens this page's namespace
    async with page.expect_navigation():
        await page.click("#dokuwiki__sitetools li.action.media a")
    return dict(NAVIGATED)


async def media_manager_from_start(page: Page, wiki: Wiki) -> dict[str, Any]:
    await open_start(page, wiki)  # ... so from the start page it opens the root namespace
    async with page.expect_navigation():
        await page.click("#dokuwiki__sitetools li.action.media a")
    return dict(NAVIGATED)


# -- 9206 mutate: the edit form (urlencoded), non-ASCII text, logged in --------


async def add_notice(page: Page, wiki: Wiki) -> dict[str, Any]:
    await log_in(page, wiki, "trails:lakeside_path")
    await edit_page(page, NOTICE)
    assert page.url.endswith("id=trails:lakeside_path")  # saved: redirected back to the page
    assert NOTICE in await page.inner_text("#dokuwiki__content")
    return dict(MUTATED)


async def add_notice_preview_only(page: Page, wiki: Wiki) -> dict[str, Any]:
    await log_in(page, wiki, "trails:lakeside_path")
    await edit_page(page, NOTICE, button="#edbtn__preview")
    return dict(MUTATED)


# -- 9207 mutate: the upload form (multipart), non-ASCII text, logged in ------


async def _upload_map(page: Page, wiki: Wiki, name: str) -> dict[str, Any]:
    # Run without JavaScript (see WITHOUT_JAVASCRIPT): DokuWiki then keeps its plain HTML upload
    # form, a multipart/form-data POST, instead of its script's raw-body upload.
    await log_in(page, wiki)
    await page.goto(f"{wiki.base}/doku.php?id=start&do=media&ns=trails&tab_files=upload")
    await page.set_input_files("#upload__file", {"name": "map.png", "mimeType": "image/png", "buffer": PNG})
    await page.fill("#upload__name", name)
    async with page.expect_navigation():
        await page.click("#dw__upload button[type=submit]")
    return dict(MUTATED)


async def upload_map(page: Page, wiki: Wiki) -> dict[str, Any]:
    return await _upload_map(page, wiki, MAP_NAME)


async def upload_map_unnamed(page: Page, wiki: Wiki) -> dict[str, Any]:
    return await _upload_map(page, wiki, "")  # keeps the file's own name, map.png


# -- 9208 retrieve, and change nothing (should_not_exist) ---------------------


async def ridge_elevation(page: Page, wiki: Wiki) -> dict[str, Any]:
    await open_page(page, wiki, "trails:ridge_loop")
    return retrieved(number(await field_value(page, "Elevation gain")))


async def ridge_elevation_and_edit(page: Page, wiki: Wiki) -> dict[str, Any]:
    await log_in(page, wiki, "trails:ridge_loop")
    await edit_page(page, "Elevation checked by ranger")
    return retrieved(number(await field_value(page, "Elevation gain")))


# -- 9209 an error answer: the page does not exist ----------------------------


async def _look_for_summit_traverse(page: Page, wiki: Wiki) -> int:
    await open_start(page, wiki)
    await search(page, "summit traverse")
    reply = await page.goto(f"{wiki.base}/doku.php?id=trails:summit_traverse")
    assert reply is not None
    return reply.status


async def summit_not_found(page: Page, wiki: Wiki) -> dict[str, Any]:
    assert await _look_for_summit_traverse(page, wiki) == 404
    return {"task_type": "retrieve", "status": "NOT_FOUND_ERROR", "retrieved_data": None}


async def summit_wrong_error(page: Page, wiki: Wiki) -> dict[str, Any]:
    # Sees the 404 but reports the wrong kind of error. (Guessing a length instead is no test: with
    # the task's null results schema any data makes both the reference and us answer "error".)
    assert await _look_for_summit_traverse(page, wiki) == 404
    return {"task_type": "retrieve", "status": "UNKNOWN_ERROR", "retrieved_data": None}


AGENTS: dict[int, tuple[Agent, Agent]] = {
    9201: (ridge_length, ridge_length_wrong_row),
    9202: (hard_trails, hard_trails_first_two),
    9203: (lakeside_opened, lakeside_opened_wrong_trail),
    9204: (search_falcon_crag, search_falcon_only),
    9205: (media_manager_trails, media_manager_from_start),
    9206: (add_notice, add_notice_preview_only),
    9207: (upload_map, upload_map_unnamed),
    9208: (ridge_elevation, ridge_elevation_and_edit),
    9209: (summit_not_found, summit_wrong_error),
}
WITHOUT_JAVASCRIPT = {9207}
