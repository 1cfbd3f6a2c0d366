"""The test site's HTTP(S) servers, standard library only.

One request handler serves the shop and the forum pages; the tests run it on
several ports of 127.0.0.1 (shop over HTTP, the same shop over HTTPS, and the
forum as a second WebArena site), each on a free port picked by the OS.

Mutations answer the way real shops do: an HTML form POST gets a 302 to a
result page, the wish-list POST also sets a URL-encoded flash-message cookie
(like Magento's `mage-messages`), and the JSON API answers JSON.
"""

from __future__ import annotations

import functools
import json
import re
import ssl
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, quote, unquote, urlsplit

from tests.site import pages
from tests.site.certs import make_self_signed
from tests.site.websocket import serve_echo

FLASH_COOKIE = "flash-messages"
CATALOG_BYTES = 3 * 1024 * 1024  # far above any body cap, and above the tests' stream_large_bodies

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


@functools.cache
def _catalog() -> bytes:
    return pages.catalog_json(CATALOG_BYTES)


class SiteHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like a real server behind the proxy
    server_version = "webarena-live-test-site/1"

    def log_message(self, format: str, *args: object) -> None:
        pass  # keep pytest output clean

    # -- plumbing ---------------------------------------------------------

    def _send(
        self,
        status: int,
        body: bytes = b"",
        *,
        content_type: str = "text/html; charset=utf-8",
        headers: tuple[tuple[str, str], ...] = (),
    ) -> None:
        self.send_response(status)
        if body or status not in (204, 302, 304):
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _html(self, text: str, status: int = 200, *, headers: tuple[tuple[str, str], ...] = ()) -> None:
        self._send(status, text.encode(), headers=headers)

    def _json(self, data: str, status: int = 200) -> None:
        self._send(status, data.encode(), content_type="application/json")

    def _redirect(self, location: str, *, headers: tuple[tuple[str, str], ...] = ()) -> None:
        self._send(302, headers=(("Location", location), *headers))

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _cookies(self) -> dict[str, str]:
        jar: dict[str, str] = {}
        for part in (self.headers.get("Cookie") or "").split(";"):
            name, _, value = part.strip().partition("=")
            if name:
                jar[name] = value
        return jar

    # -- routes -----------------------------------------------------------

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        path = url.path
        if path in _STATIC:
            content_type, data = _STATIC[path]
            self._send(200, data, content_type=content_type, headers=(("Cache-Control", "no-store"),))
        elif path == "/favicon.ico":
            self._send(204)
        elif path == "/":
            self._html(pages.home_page())
        elif path == "/category/gear":
            self._html(pages.category_page())
        elif path == "/search":
            self._html(pages.search_page(parse_qs(url.query).get("q", [""])[0]))
        elif path == "/contact":
            self._html(pages.contact_page())
        elif path == "/contact/thanks":
            self._html(pages.thanks_page())
        elif path == "/cart":
            self._html(pages.cart_page())
        elif path == "/chat":
            self._html(pages.websocket_page())
        elif path == "/ws/echo":
            serve_echo(self)
        elif path == "/api/catalog.json":
            self._send(200, _catalog(), content_type="application/json")
        elif path == "/wishlist":
            flash = self._cookies().get(FLASH_COOKIE)
            # Show the flash message once, then expire the cookie.
            expire = (("Set-Cookie", f"{FLASH_COOKIE}=; Path=/; Max-Age=0"),) if flash else ()
            self._html(pages.wishlist_page(unquote(flash) if flash else None), headers=expire)
        elif match := _PRODUCT.match(path):
            self._product_route(match, pages.product_page)
        elif match := _REVIEW_FORM.match(path):
            self._product_route(match, pages.review_page)
        elif match := _PRODUCT_API.match(path):
            product = pages.PRODUCTS.get(int(match.group(1)))
            if product is None:
                self._json(json.dumps({"error": "no such product"}), 404)
            else:
                self._json(pages.product_json(product))
        elif match := _FORUM.match(path):
            self._html(pages.forum_page(match.group(1)))
        elif match := _POST.match(path):
            title = pages.FORUM_POSTS.get(match.group(1), {}).get(int(match.group(2)))
            if title is None:
                self._html(pages.not_found_page(), 404)
            else:
                self._html(pages.post_page(match.group(1), int(match.group(2)), title))
        else:
            self._html(pages.not_found_page(), 404)

    def do_POST(self) -> None:
        path = urlsplit(self.path).path
        body = self._body()
        content_type = self.headers.get("Content-Type") or ""
        if path == "/contact":
            if "application/x-www-form-urlencoded" not in content_type:
                self._html(pages.not_found_page(), 415)
                return
            self._redirect("/contact/thanks")
        elif path == "/wishlist/add":
            form = parse_qs(body.decode())
            product = pages.PRODUCTS.get(int(form.get("product", ["0"])[0] or 0))
            if product is None:
                self._redirect("/wishlist")
                return
            message = json.dumps(
                [{"type": "success", "text": f"{product.name} has been added to your wish list."}]
            )
            cookie = f"{FLASH_COOKIE}={quote(message)}; Path=/"
            self._redirect("/wishlist", headers=(("Set-Cookie", cookie),))
        elif match := _REVIEWS.match(path):
            if not content_type.startswith("multipart/form-data"):
                self._html(pages.not_found_page(), 415)
                return
            self._redirect(f"/products/{match.group(1)}")
        elif path == "/api/cart/items":
            try:
                item = json.loads(body).get("item", {})
            except (ValueError, AttributeError):
                self._json(json.dumps({"error": "expected a JSON object"}), 400)
                return
            self._json(pages.cart_json(item if isinstance(item, dict) else {}))
        else:
            self._html(pages.not_found_page(), 404)

    def _product_route(self, match: re.Match[str], render: Callable[[pages.Product], str]) -> None:
        product = pages.PRODUCTS.get(int(match.group(1)))
        if product is None:
            self._html(pages.not_found_page(), 404)
            return
        self._html(render(product))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


@dataclass(frozen=True)
class RunningSite:
    """Base URLs (no trailing slash) of the site's servers."""

    shop_http: str
    shop_https: str
    forum_http: str

    def site_map(self) -> dict[str, dict[str, object]]:
        """The `environments` section of a reference-format config file."""
        return {
            "__SHOPPING__": {"urls": [self.shop_http, self.shop_https], "active_url_idx": 0},
            "__REDDIT__": {"urls": [self.forum_http], "active_url_idx": 0},
        }


def _serve(tls: ssl.SSLContext | None = None) -> tuple[_Server, str]:
    server = _Server(("127.0.0.1", 0), SiteHandler)
    if tls is not None:
        # Handshake lazily in the request thread, so one slow client cannot
        # stall the accept loop.
        server.socket = tls.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
    threading.Thread(target=server.serve_forever, name="test-site", daemon=True).start()
    scheme = "https" if tls else "http"
    return server, f"{scheme}://127.0.0.1:{server.server_address[1]}"


@contextmanager
def run_site(workdir: Path) -> Iterator[RunningSite]:
    """Serve the shop over HTTP and HTTPS and the forum over HTTP until exit."""
    tls_files = make_self_signed(workdir)
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(tls_files.cert, tls_files.key)
    servers = []
    try:
        shop, shop_url = _serve()
        servers.append(shop)
        shop_tls, shop_tls_url = _serve(tls)
        servers.append(shop_tls)
        forum, forum_url = _serve()
        servers.append(forum)
        yield RunningSite(shop_http=shop_url, shop_https=shop_tls_url, forum_http=forum_url)
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()
