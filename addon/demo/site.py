"""Demo Shop: the small web shop the embedded demo (`webarena-live demo`) runs against.

Standard library only. It behaves like the storefront pages the WebArena tasks
were written for: product pages at `/<slug>.html`, a search at
`/catalogsearch/result/?q=...` with sorting, an add-to-cart form POST answered
by a 302 redirect and a flash-message cookie, and JSON APIs called by page
JavaScript with fetch() (the wish list and the cart totals). Each browser gets
its own cart and wish list, keyed by a session cookie, so tasks run in separate
browser contexts never see each other's changes.

    python -m webarena_live.demo.site --port 8000   # serve until Ctrl-C
    server = serve("127.0.0.1", 0); server.url     # from Python, in a thread
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import secrets
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from http.cookies import SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from webarena_live.demo.catalog import (
    ASSETS,
    MESSAGES_COOKIE,
    Markup,
    Product,
    cards,
    flash_cookie,
    flash_html,
    load_catalog,
    money,
    render,
    search,
)

SESSION_COOKIE = "shop_sid"

_STATIC_TYPES = {".css": "text/css", ".js": "text/javascript", ".svg": "image/svg+xml"}


@dataclass
class Visitor:
    """One browser's cart (product id -> quantity) and wish list (product ids, in order added)."""

    cart: dict[int, int] = field(default_factory=dict)
    wishlist: list[int] = field(default_factory=list)


class DemoShopServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int]) -> None:
        super().__init__(address, ShopHandler)
        self.shop_name, self.products = load_catalog()
        self.by_slug = {p.slug: p for p in self.products}
        self.by_id = {p.id: p for p in self.products}
        self.visitors: dict[str, Visitor] = {}
        self.lock = threading.Lock()
        self.secret = secrets.token_bytes(16)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Browsers drop connections all the time (and all at once when stopped): not worth a traceback."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)

    @property
    def url(self) -> str:
        """Base URL, without a trailing slash (the form site maps use)."""
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"

    def form_key(self, sid: str) -> str:
        """Per-visitor anti-forgery token that every form POST must echo back."""
        return hmac.new(self.secret, sid.encode(), hashlib.sha256).hexdigest()[:16]

    def visitor(self, sid: str) -> Visitor:
        with self.lock:
            return self.visitors.setdefault(sid, Visitor())

    def reset(self) -> None:
        """Back to the seeded state: every cart and wish list empty (`demo/reset.py` serves it)."""
        with self.lock:
            self.visitors.clear()


class ShopHandler(BaseHTTPRequestHandler):
    server: DemoShopServer
    server_version = "DemoShop/1.0"
    protocol_version = "HTTP/1.1"

    # -- plumbing ---------------------------------------------------------------------------------

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the demo prints its own table, not an access log."""

    def _cookies(self) -> dict[str, str]:
        jar: SimpleCookie = SimpleCookie()
        jar.load(self.headers.get("Cookie", ""))
        return {name: morsel.value for name, morsel in jar.items()}

    def _session(self) -> tuple[str, list[str]]:
        """The visitor's session id, and the Set-Cookie headers needed to give it one."""
        sid = self._cookies().get(SESSION_COOKIE, "")
        if sid:
            return sid, []
        sid = secrets.token_hex(12)
        return sid, [f"{SESSION_COOKIE}={sid}; Path=/; HttpOnly; SameSite=Lax"]

    def _send(
        self, status: int, body: bytes, content_type: str, headers: Sequence[tuple[str, str]] = ()
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, payload: Any, cookies: list[str]) -> None:
        headers = [("Set-Cookie", c) for c in cookies]
        self._send(status, json.dumps(payload).encode(), "application/json", headers)

    def _redirect(self, location: str, cookies: list[str]) -> None:
        headers = [("Location", location), *(("Set-Cookie", c) for c in cookies)]
        self._send(HTTPStatus.FOUND, b"", "text/html; charset=utf-8", headers)

    def _page(self, title: str, content: Markup, sid: str, cookies: list[str], status: int = 200) -> None:
        """Send a full page; flash messages from the cookie are shown once, then cleared."""
        raw_messages = self._cookies().get(MESSAGES_COOKIE, "")
        if raw_messages:
            cookies = [*cookies, f"{MESSAGES_COOKIE}=; Path=/; Max-Age=0"]
        visitor = self.server.visitor(sid)
        page = render(
            "layout",
            title=title,
            shop=self.server.shop_name,
            query=parse_qs(urlsplit(self.path).query).get("q", [""])[0],
            wishlist_count=len(visitor.wishlist),
            cart_count=sum(visitor.cart.values()),
            messages=flash_html(raw_messages) if raw_messages else Markup(),
            content=content,
        )
        self._send(status, page.encode(), "text/html; charset=utf-8", [("Set-Cookie", c) for c in cookies])

    # -- routes -----------------------------------------------------------------------------------

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        path, params = parts.path, parse_qs(parts.query)
        if path.startswith("/static/"):
            return self._static(path.removeprefix("/static/"))
        if path.startswith("/media/") and path.endswith(".svg"):
            return self._image(path.removeprefix("/media/").removesuffix(".svg"))
        if path == "/favicon.ico":
            return self._redirect("/static/logo.svg", [])
        sid, cookies = self._session()
        visitor = self.server.visitor(sid)
        if path == "/":
            content = render("home", cards=cards(self.server.products))
            return self._page("Home", Markup(content), sid, cookies)
        if path == "/catalogsearch/result/":
            return self._search(params, sid, cookies)
        if path == "/checkout/cart/":
            content = render("cart", table=self._cart_table(visitor))
            return self._page("Shopping Cart", Markup(content), sid, cookies)
        if path == "/wishlist/":
            return self._wishlist(visitor, sid, cookies)
        if path == "/rest/V1/carts/mine/totals":
            return self._json(200, self._totals(visitor), cookies)
        product = self.server.by_slug.get(path[1:].removesuffix(".html")) if path.endswith(".html") else None
        if product is not None:
            return self._product(product, sid, cookies)
        self._page("Page not found", Markup(render("not_found")), sid, cookies, HTTPStatus.NOT_FOUND)

    def do_POST(self) -> None:
        path = urlsplit(self.path).path
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode("utf-8", "replace")
        sid, cookies = self._session()
        if path == "/checkout/cart/add/":
            return self._add_to_cart(parse_qs(body, keep_blank_values=True), sid, cookies)
        if path == "/rest/V1/wishlist/items":
            return self._add_to_wishlist(body, sid, cookies)
        self._json(404, {"message": f"no such endpoint: POST {path}"}, cookies)

    def _static(self, name: str) -> None:
        suffix = PurePosixPath(name).suffix
        if "/" in name or name.startswith(".") or suffix not in _STATIC_TYPES:
            return self._send(404, b"not found", "text/plain")
        file = ASSETS.joinpath("static", name)
        if not file.is_file():
            return self._send(404, b"not found", "text/plain")
        self._send(200, file.read_bytes(), _STATIC_TYPES[suffix], [("Cache-Control", "max-age=3600")])

    def _image(self, ident: str) -> None:
        product = self.server.by_id.get(int(ident)) if ident.isdigit() else None
        if product is None:
            return self._send(404, b"not found", "text/plain")
        initials = "".join(word[0] for word in product.name.split()[:2])
        svg = render("product_image", color=product.color, initials=initials, suffix=".svg")
        self._send(200, svg.encode(), "image/svg+xml", [("Cache-Control", "max-age=3600")])

    def _search(self, params: dict[str, list[str]], sid: str, cookies: list[str]) -> None:
        query = params.get("q", [""])[0]
        found = search(
            self.server.products,
            query,
            params.get("product_list_order", [""])[0],
            params.get("product_list_dir", ["asc"])[0],
        )

        def sort_query(order: str, direction: str) -> str:
            return urlencode({"q": query, "product_list_order": order, "product_list_dir": direction})

        results = (
            Markup(f'<div class="grid results">{cards(found)}</div>')
            if found
            else Markup("<p>Your search returned no results.</p>")
        )
        content = render(
            "search",
            query=query,
            count=len(found),
            by_price_asc=sort_query("price", "asc"),
            by_price_desc=sort_query("price", "desc"),
            by_name=sort_query("name", "asc"),
            results=results,
        )
        self._page(f"Search results for: '{query}'", Markup(content), sid, cookies)

    def _product(self, product: Product, sid: str, cookies: list[str]) -> None:
        reviews = "".join(
            render(
                "review",
                stars="★" * r["rating"] + "☆" * (5 - r["rating"]),
                title=r["title"],
                text=r["text"],
                author=r["author"],
            )
            for r in product.reviews
        )
        content = render(
            "product",
            id=product.id,
            name=product.name,
            price=money(product.price),
            description=product.description,
            category=product.category,
            sku=f"{product.id:04d}",
            form_key=self.server.form_key(sid),
            review_count=len(product.reviews),
            reviews=Markup(reviews or "<p>No reviews yet.</p>"),
        )
        self._page(product.name, Markup(content), sid, cookies)

    def _rows(self, visitor: Visitor) -> list[tuple[Product, int]]:
        return [(self.server.by_id[pid], qty) for pid, qty in visitor.cart.items()]

    def _totals(self, visitor: Visitor) -> dict[str, Any]:
        """The cart in the shape storefront totals APIs answer with."""
        rows = self._rows(visitor)
        items = [
            {
                "item_id": p.id,
                "name": p.name,
                "qty": qty,
                "price": p.price,
                "row_total": round(p.price * qty, 2),
            }
            for p, qty in rows
        ]
        grand_total = round(sum(p.price * qty for p, qty in rows), 2)
        return {"items_qty": sum(qty for _, qty in rows), "grand_total": grand_total, "items": items}

    def _cart_table(self, visitor: Visitor) -> Markup:
        rows = [
            render(
                "cart_row",
                path=p.path,
                name=p.name,
                qty=qty,
                price=money(p.price),
                subtotal=money(p.price * qty),
            )
            for p, qty in self._rows(visitor)
        ]
        if not rows:
            return Markup("<p>You have no items in your shopping cart.</p>")
        return Markup(render("cart_table", rows=Markup("".join(rows))))

    def _wishlist(self, visitor: Visitor, sid: str, cookies: list[str]) -> None:
        products = [self.server.by_id[pid] for pid in visitor.wishlist]
        listing = (
            f'<div class="grid">{cards(products)}</div>' if products else "<p>Your wish list is empty.</p>"
        )
        self._page("My Wish List", Markup(render("wishlist", listing=Markup(listing))), sid, cookies)

    def _add_to_cart(self, form: dict[str, list[str]], sid: str, cookies: list[str]) -> None:
        def field_value(name: str) -> str:
            return form.get(name, [""])[0]

        back = self.headers.get("Referer") or "/"
        if not hmac.compare_digest(field_value("form_key"), self.server.form_key(sid)):
            error = flash_cookie("Invalid form key. Please refresh the page.", "error")
            return self._redirect(back, [*cookies, error])
        product_id = field_value("product")
        product = self.server.by_id.get(int(product_id)) if product_id.isdigit() else None
        if product is None:
            return self._redirect(back, [*cookies, flash_cookie("That product does not exist.", "error")])
        qty = int(field_value("qty")) if field_value("qty").isdigit() else 1
        visitor = self.server.visitor(sid)
        with self.server.lock:
            visitor.cart[product.id] = visitor.cart.get(product.id, 0) + max(qty, 1)
        message = flash_cookie(f"You added {product.name} to your shopping cart.")
        self._redirect("/checkout/cart/", [*cookies, message])

    def _add_to_wishlist(self, body: str, sid: str, cookies: list[str]) -> None:
        try:
            payload = json.loads(body)
            product = self.server.by_id[int(payload["product_id"])]
        except (ValueError, KeyError, TypeError):
            return self._json(400, {"message": "Send a JSON object with a valid product_id."}, cookies)
        visitor = self.server.visitor(sid)
        with self.server.lock:
            if product.id not in visitor.wishlist:
                visitor.wishlist.append(product.id)
            items = [{"product_id": p, "name": self.server.by_id[p].name} for p in visitor.wishlist]
        message = f"{product.name} has been added to your wish list."
        self._json(200, {"message": message, "items_count": len(items), "items": items}, cookies)


def serve(host: str = "127.0.0.1", port: int = 0) -> DemoShopServer:
    """Start the shop in a background thread; `port=0` picks a free port. Stop with `.shutdown()`."""
    server = DemoShopServer((host, port))
    threading.Thread(target=server.serve_forever, name="demo-shop", daemon=True).start()
    return server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Serve the Demo Shop used by `webarena-live demo`.")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port; 0 picks a free one (default: 8000)")
    parser.add_argument(
        "--reset-port", type=int, metavar="PORT",
        help="also serve POST /reset (the environment-control shape) on this port: every cart and wish list "
        "emptied; 0 picks a free one",
    )  # fmt: skip
    args = parser.parse_args(argv)
    server = DemoShopServer((args.host, args.port))
    print(f"Demo Shop at {server.url}/  (Ctrl-C to stop)", flush=True)
    if args.reset_port is not None:
        from webarena_live.demo.reset import serve_reset

        print(f"Reset endpoint at {serve_reset(server, args.host, args.reset_port).url}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
