"""The test site's routes as pure functions from a request to an `Answer`,
shared by the HTTP/1.1 server (`server.py`) and the HTTP/2 one (`http2.py`).

Mutations answer the way real shops do: an HTML form POST gets a 302 to a
result page, the wish-list POST also sets a URL-encoded flash-message cookie
(like Magento's `mage-messages`), and the JSON API answers JSON.
"""

from __future__ import annotations

import functools
import gzip
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import parse_qs, quote, unquote, urlsplit

from tests.site import pages

FLASH_COOKIE = "flash-messages"
CATALOG_BYTES = 3 * 1024 * 1024  # far above any body cap, and above the tests' stream_large_bodies

HTML = "text/html; charset=utf-8"
JSON = "application/json"

_PRODUCT = re.compile(r"^/products/(\d+)$")
_REVIEW_FORM = re.compile(r"^/products/(\d+)/review$")
_REVIEWS = re.compile(r"^/products/(\d+)/reviews$")
_PRODUCT_API = re.compile(r"^/api/products/(\d+)$")
_FORUM = re.compile(r"^/f/([a-z]+)$")
_POST = re.compile(r"^/f/([a-z]+)/(\d+)$")

_STATIC = {
    "/static/site.css": ("text/css", pages.SITE_CSS.encode()),
    "/static/app.js": ("text/javascript", pages.SITE_JS.encode()),
    "/static/logo.png": ("image/png", pages.LOGO_PNG),
}

_SIMPLE_PAGES: dict[str, Callable[[], str]] = {
    "/": pages.home_page,
    "/category/gear": pages.category_page,
    "/contact": pages.contact_page,
    "/contact/thanks": pages.thanks_page,
    "/cart": pages.cart_page,
    "/chat": pages.websocket_page,
}


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes = b""
    content_type: str | None = HTML
    headers: tuple[tuple[str, str], ...] = ()
    compressible: bool = True


def compress_for(answer: Answer, accept_encoding: str | None) -> Answer:
    """Gzip text and JSON bodies for clients that accept it, as production web
    servers do: the proxy must keep and export the decoded body."""
    compressible = answer.compressible and (answer.content_type or "").startswith(("text/", JSON))
    if not answer.body or not compressible or "gzip" not in (accept_encoding or "").lower():
        return answer
    headers = (*answer.headers, ("Content-Encoding", "gzip"), ("Vary", "Accept-Encoding"))
    return Answer(answer.status, gzip.compress(answer.body), answer.content_type, headers)


def html(text: str, status: int = 200, *, headers: tuple[tuple[str, str], ...] = ()) -> Answer:
    return Answer(status, text.encode(), HTML, headers)


def redirect(location: str, *, headers: tuple[tuple[str, str], ...] = ()) -> Answer:
    return Answer(302, b"", None, (("Location", location), *headers))


def not_found() -> Answer:
    return html(pages.not_found_page(), 404)


def parse_cookies(header: str | None) -> dict[str, str]:
    jar: dict[str, str] = {}
    for part in (header or "").split(";"):
        name, _, value = part.strip().partition("=")
        if name:
            jar[name] = value
    return jar


@functools.cache
def _catalog() -> bytes:
    return pages.catalog_json(CATALOG_BYTES)


def _product_page(match: re.Match[str], render: Callable[[pages.Product], str]) -> Answer:
    product = pages.PRODUCTS.get(int(match.group(1)))
    return not_found() if product is None else html(render(product))


def answer_get(target: str, cookies: dict[str, str]) -> Answer:
    url = urlsplit(target)
    path = url.path
    if path in _STATIC:
        content_type, data = _STATIC[path]
        return Answer(200, data, content_type, (("Cache-Control", "no-store"),))
    if path in _SIMPLE_PAGES:
        return html(_SIMPLE_PAGES[path]())
    if path == "/favicon.ico":
        return Answer(204, content_type=None)
    if path == "/search":
        return html(pages.search_page(parse_qs(url.query).get("q", [""])[0]))
    if path == "/api/catalog.json":
        # Sent as is: gzip would shrink it below stream_large_bodies.
        return Answer(200, _catalog(), JSON, compressible=False)
    if path == "/wishlist":
        flash = cookies.get(FLASH_COOKIE)
        # Show the flash message once, then expire the cookie.
        expire = (("Set-Cookie", f"{FLASH_COOKIE}=; Path=/; Max-Age=0"),) if flash else ()
        return html(pages.wishlist_page(unquote(flash) if flash else None), headers=expire)
    if match := _PRODUCT.match(path):
        return _product_page(match, pages.product_page)
    if match := _REVIEW_FORM.match(path):
        return _product_page(match, pages.review_page)
    if match := _PRODUCT_API.match(path):
        product = pages.PRODUCTS.get(int(match.group(1)))
        if product is None:
            return Answer(404, json.dumps({"error": "no such product"}).encode(), JSON)
        return Answer(200, pages.product_json(product).encode(), JSON)
    if match := _FORUM.match(path):
        return html(pages.forum_page(match.group(1)))
    if match := _POST.match(path):
        forum, post_id = match.group(1), int(match.group(2))
        title = pages.FORUM_POSTS.get(forum, {}).get(post_id)
        return not_found() if title is None else html(pages.post_page(forum, post_id, title))
    return not_found()


def answer_post(target: str, content_type: str, body: bytes) -> Answer:
    path = urlsplit(target).path
    if path == "/contact":
        if "application/x-www-form-urlencoded" not in content_type:
            return html(pages.not_found_page(), 415)
        return redirect("/contact/thanks")
    if path == "/wishlist/add":
        form = parse_qs(body.decode(errors="replace"))
        product = pages.PRODUCTS.get(int(form.get("product", ["0"])[0] or 0))
        if product is None:
            return redirect("/wishlist")
        text = f"{product.name} has been added to your wish list."
        message = json.dumps([{"type": "success", "text": text}])
        return redirect("/wishlist", headers=(("Set-Cookie", f"{FLASH_COOKIE}={quote(message)}; Path=/"),))
    if match := _REVIEWS.match(path):
        if not content_type.startswith("multipart/form-data"):
            return html(pages.not_found_page(), 415)
        return redirect(f"/products/{match.group(1)}")
    if path == "/api/cart/items":
        try:
            item = json.loads(body).get("item", {})
        except (ValueError, AttributeError):
            return Answer(400, json.dumps({"error": "expected a JSON object"}).encode(), JSON)
        return Answer(200, pages.cart_json(item if isinstance(item, dict) else {}).encode(), JSON)
    return not_found()
