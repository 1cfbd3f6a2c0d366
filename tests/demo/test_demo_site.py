"""The Demo Shop (`webarena_live.demo.site`; its catalog and pages: `demo_catalog`), over real sockets
on 127.0.0.1."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlencode

import pytest

from webarena_live.demo import catalog as demo_catalog
from webarena_live.demo import site as demo_site
from webarena_live.launch import free_ports


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class Browser:
    """A tiny cookie-keeping client that does not follow redirects, to see the 302s."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.cookies: dict[str, str] = {}
        self.opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), NoRedirect)

    def request(
        self, path: str, data: bytes | None = None, content_type: str | None = None
    ) -> tuple[int, dict[str, list[str]], str]:
        request = urllib.request.Request(self.base + path, data=data)
        if content_type:
            request.add_header("Content-Type", content_type)
        if self.cookies:
            request.add_header("Cookie", "; ".join(f"{k}={v}" for k, v in self.cookies.items()))
        try:
            reply = self.opener.open(request, timeout=5)
        except urllib.error.HTTPError as error:
            reply = error
        with reply:
            headers: dict[str, list[str]] = {}
            for name, value in reply.headers.items():
                headers.setdefault(name.lower(), []).append(value)
            for raw in headers.get("set-cookie", []):
                jar: SimpleCookie = SimpleCookie()
                jar.load(raw)
                for name, morsel in jar.items():
                    if morsel["max-age"] == "0":
                        self.cookies.pop(name, None)
                    else:
                        self.cookies[name] = morsel.value
            return reply.status, headers, reply.read().decode()


@pytest.fixture()
def shop() -> Iterator[Any]:
    server = demo_site.serve("127.0.0.1", 0)
    yield server
    server.shutdown()
    server.server_close()


def product_names(page: str) -> list[str]:
    return re.findall(r'class="name product-link" href="[^"]+">([^<]+)</a>', page)


def test_search_matches_every_word_and_sorts() -> None:
    _, products = demo_catalog.load_catalog()
    assert [p.name for p in demo_catalog.search(products, "mug")] == [
        "Stoneware Coffee Mug 12 oz",
        "Enamel Camp Mug",
        "Double-Wall Travel Mug",
    ]
    assert [p.price for p in demo_catalog.search(products, "mug", "price", "asc")] == [9.75, 12.5, 21.0]
    most_expensive = demo_catalog.search(products, "BACKPACK", "price", "desc")[0]
    assert most_expensive.slug == "trailblazer-hiking-backpack-40l"
    assert demo_catalog.search(products, "desk lamp")[0].name == "Aurora Desk Lamp"
    assert demo_catalog.search(products, "   ") == []
    assert demo_catalog.search(products, "mug lamp") == []


def test_render_escapes_values_but_not_markup() -> None:
    html = demo_catalog.render("message", kind="error", text="<b>&</b>")
    assert "&lt;b&gt;&amp;&lt;/b&gt;" in html and 'class="message error"' in html
    assert "<i>x</i>" in demo_catalog.render("message", kind="", text=demo_catalog.Markup("<i>x</i>"))
    assert demo_catalog.money(1234.5) == "$1,234.50"


def test_pages_search_and_static_assets(shop: Any) -> None:
    browser = Browser(shop.url)
    status, headers, home = browser.request("/")
    assert status == 200 and headers["content-type"] == ["text/html; charset=utf-8"]
    assert "shop_sid" in browser.cookies
    assert len(product_names(home)) == 9
    status, _, results = browser.request("/catalogsearch/result/?" + urlencode({"q": "mug"}))
    assert status == 200 and "3 item(s)" in results
    assert product_names(results) == [
        "Stoneware Coffee Mug 12 oz",
        "Enamel Camp Mug",
        "Double-Wall Travel Mug",
    ]
    sort_link = re.search(r'class="sort-price-asc" href="([^"]+)"', results)
    assert sort_link is not None
    _, _, sorted_page = browser.request(sort_link.group(1).replace("&amp;", "&"))
    assert product_names(sorted_page)[0] == "Enamel Camp Mug"
    status, _, product = browser.request("/aurora-desk-lamp.html")
    assert status == 200 and 'id="product-price">$34.99<' in product
    assert re.search(r"Review by <span class=\"review-author\">Priya Raman</span>", product)
    for path, kind in (("/static/style.css", "text/css"), ("/static/app.js", "text/javascript"),
                       ("/media/5.svg", "image/svg+xml")):  # fmt: skip
        status, headers, _ = browser.request(path)
        assert (status, headers["content-type"]) == (200, [kind]), path
    assert browser.request("/no-such-product.html")[0] == 404
    assert browser.request("/static/../site.py")[0] == 404
    assert browser.request("/media/99.svg")[0] == 404


def test_add_to_cart_posts_redirect_with_a_flash_cookie(shop: Any) -> None:
    browser = Browser(shop.url)
    _, _, page = browser.request("/trailblazer-hiking-backpack-40l.html")
    form_key = re.search(r'name="form_key" value="([0-9a-f]+)"', page)
    assert form_key is not None
    form = "application/x-www-form-urlencoded"

    status, headers, _ = browser.request(
        "/checkout/cart/add/", urlencode({"form_key": "forged", "product": "5", "qty": "1"}).encode(), form
    )
    assert status == 302 and "Invalid form key" in unquote(browser.cookies["shop-messages"])
    browser.request("/")  # the page shows the message once and clears the cookie
    assert "shop-messages" not in browser.cookies

    body = urlencode({"form_key": form_key.group(1), "product": "5", "qty": "2"}).encode()
    status, headers, _ = browser.request("/checkout/cart/add/", body, form)
    assert status == 302 and headers["location"] == ["/checkout/cart/"]
    flash = json.loads(unquote(browser.cookies["shop-messages"]))
    assert flash == [
        {"type": "success", "text": "You added Trailblazer Hiking Backpack 40L to your shopping cart."}
    ]
    status, _, cart = browser.request("/checkout/cart/")
    assert status == 200 and "You added Trailblazer Hiking Backpack 40L" in cart and "$178.00" in cart
    status, headers, totals = browser.request("/rest/V1/carts/mine/totals?_=1")
    assert headers["content-type"] == ["application/json"]
    assert json.loads(totals) == {
        "items_qty": 2,
        "grand_total": 178.0,
        "items": [
            {
                "item_id": 5,
                "name": "Trailblazer Hiking Backpack 40L",
                "qty": 2,
                "price": 89.0,
                "row_total": 178.0,
            }
        ],
    }
    # Another visitor (no cookies) has an empty cart.
    assert json.loads(Browser(shop.url).request("/rest/V1/carts/mine/totals")[2])["items_qty"] == 0


def test_wishlist_json_api(shop: Any) -> None:
    browser = Browser(shop.url)
    browser.request("/")
    status, _, reply = browser.request(
        "/rest/V1/wishlist/items", b'{"product_id": 1, "qty": 1}', "application/json"
    )
    assert status == 200
    assert json.loads(reply) == {
        "message": "Aurora Desk Lamp has been added to your wish list.",
        "items_count": 1,
        "items": [{"product_id": 1, "name": "Aurora Desk Lamp"}],
    }
    assert (
        browser.request("/rest/V1/wishlist/items", b'{"product_id": 1}', "application/json")[2].count(
            "product_id"
        )
        == 1
    )  # adding twice keeps one entry
    assert browser.request("/rest/V1/wishlist/items", b"not json", "application/json")[0] == 400
    assert browser.request("/rest/V1/wishlist/items", b'{"product_id": 42}', "application/json")[0] == 400
    assert "Aurora Desk Lamp" in browser.request("/wishlist/")[2]
    assert browser.request("/nowhere", b"{}", "application/json")[0] == 404


def test_runs_as_a_script_on_the_given_port(tmp_path: Path) -> None:
    (port,) = free_ports(1)
    process = subprocess.Popen(
        [sys.executable, "-m", "webarena_live.demo.site", "--port", str(port)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == f"Demo Shop at http://127.0.0.1:{port}/  (Ctrl-C to stop)"
        deadline = time.monotonic() + 5
        while True:
            try:
                status = Browser(f"http://127.0.0.1:{port}").request("/")[0]
                break
            except urllib.error.URLError:
                assert time.monotonic() < deadline
                time.sleep(0.05)
        assert status == 200
    finally:
        process.terminate()
        process.wait(timeout=5)
