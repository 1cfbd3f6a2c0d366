"""Content of the test site: a tiny shop and a tiny forum.

Pure functions from data to HTML or JSON text; `server.py` does the HTTP.
Every page links the same stylesheet, script and logo, so browsing produces
static-asset traffic the evaluator must ignore. Element ids are stable so the
scripted agents in the tests can click and read them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from html import escape


@dataclass(frozen=True)
class Product:
    product_id: int
    name: str
    sku: str
    price_text: str
    """As the page shows it; the retrieve task's answer uses another format."""
    price: float
    released_text: str
    stock: int


PRODUCTS = {
    1: Product(1, "Summit Backpack", "SB-100", "$89.99", 89.99, "January 12, 2023", 5),
    2: Product(2, "Trail Lantern", "TL-200", "$1,234.50", 1234.50, "March 5, 2024", 17),
    3: Product(3, "River Kettle", "RK-300", "$24.00", 24.00, "October 30, 2022", 0),
}

FORUM_POSTS = {
    "hiking": {7: "Best lantern for winter camping?", 8: "Trail report: Ridge Loop"},
    "cooking": {11: "Kettle recommendations"},
}

# The smallest valid PNG (1x1, transparent), served as the site logo.
LOGO_PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000105fe02fea70000000049454e44ae426082"
)

SITE_CSS = "body { font-family: sans-serif; margin: 2em; } nav a { margin-right: 1em; }\n"

# Runs on every page: a static asset whose only job is to be noise in the trace.
SITE_JS = "document.documentElement.dataset.ready = 'yes';\n"


def layout(title: str, body: str, *, flash: str | None = None) -> str:
    notice = f'<p id="flash" class="flash">{escape(flash)}</p>' if flash else ""
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{escape(title)}</title>
<link rel="stylesheet" href="/static/site.css"><script src="/static/app.js"></script></head>
<body><img src="/static/logo.png" alt="logo" width="16" height="16">
<nav><a id="nav-home" href="/">Home</a><a id="nav-gear" href="/category/gear">Gear</a>
<a id="nav-contact" href="/contact">Contact</a><a id="nav-wishlist" href="/wishlist">Wish list</a>
<a id="nav-cart" href="/cart">Cart</a><a id="nav-forum" href="/f/hiking">Forum</a></nav>
{notice}<h1 id="title">{escape(title)}</h1>
{body}
</body></html>
"""


def home_page() -> str:
    return layout(
        "Outdoor Shop",
        """<p>Welcome to the test shop.</p>
<form id="search" action="/search" method="get"><input id="q" name="q"><button id="go">Search</button></form>
<ul><li><a id="to-gear" href="/category/gear">Browse gear</a></li></ul>""",
    )


def category_page() -> str:
    items = "".join(
        f'<li><a id="product-{p.product_id}" href="/products/{p.product_id}">{escape(p.name)}</a></li>'
        for p in PRODUCTS.values()
    )
    return layout("Gear", f"<ul>{items}</ul>")


def product_page(product: Product) -> str:
    # The stock figure is not in the HTML: the page's script fetches it from
    # the JSON API, like a shop front loading data with XHR.
    return layout(
        product.name,
        f"""<p>Price: <span id="price">{escape(product.price_text)}</span></p>
<p>Released: <span id="released">{escape(product.released_text)}</span></p>
<p>In stock: <span id="stock">loading</span></p>
<form id="wishlist-form" action="/wishlist/add" method="post">
<input type="hidden" name="product" value="{product.product_id}">
<input type="hidden" name="form_key" value="k3y-{product.product_id}">
<button id="add-to-wishlist">Add to wish list</button></form>
<p><a id="write-review" href="/products/{product.product_id}/review">Write a review</a></p>
<script>
fetch('/api/products/{product.product_id}', {{headers: {{'accept': 'application/json'}}}})
  .then(r => r.json())
  .then(d => {{ document.getElementById('stock').textContent = String(d.stock.count); }});
</script>""",
    )


def review_page(product: Product) -> str:
    return layout(
        f"Review {product.name}",
        f"""<form id="review-form" action="/products/{product.product_id}/reviews" method="post"
 enctype="multipart/form-data">
<select id="rating" name="rating"><option>1</option><option>2</option><option>3</option>
<option>4</option><option>5</option></select>
<input id="review-title" name="title"><textarea id="review-body" name="body"></textarea>
<input id="review-photo" type="file" name="photo" accept="image/png">
<button id="submit-review">Submit review</button></form>""",
    )


def contact_page() -> str:
    return layout(
        "Contact us",
        """<form id="contact-form" action="/contact" method="post">
<input id="contact-name" name="name"><input id="contact-email" name="email">
<input id="contact-subject" name="subject"><textarea id="contact-message" name="message"></textarea>
<button id="send">Send</button></form>""",
    )


def thanks_page() -> str:
    return layout("Thank you", "<p id='thanks'>We received your message.</p>")


def wishlist_page(flash: str | None) -> str:
    return layout("Wish list", "<p>Your saved items.</p>", flash=flash)


def cart_page() -> str:
    # The button posts JSON with fetch(): a mutation that is not a navigation.
    return layout(
        "Cart",
        """<p id="cart-status">empty</p>
<button id="add-lanterns" onclick="addLanterns()">Add two lanterns</button>
<script>
function addLanterns() {
  fetch('/api/cart/items', {
    method: 'POST',
    headers: {'content-type': 'application/json'},
    body: JSON.stringify({item: {sku: 'TL-200', qty: 2}, source: 'cart-page'})
  }).then(r => r.json()).then(d => {
    document.getElementById('cart-status').textContent = 'items: ' + d.cart.count;
  });
}
</script>""",
    )


def search_page(query: str) -> str:
    words = query.lower().split()
    hits = [p for p in PRODUCTS.values() if words and all(w in p.name.lower() for w in words)]
    items = "".join(f'<li><a href="/products/{p.product_id}">{escape(p.name)}</a></li>' for p in hits)
    return layout(f"Search: {query}", f"<ul id='results'>{items}</ul><p>{len(hits)} result(s)</p>")


def forum_page(forum: str) -> str:
    posts = FORUM_POSTS.get(forum, {})
    items = "".join(
        f'<li><a id="post-{post_id}" href="/f/{forum}/{post_id}">{escape(title)}</a></li>'
        for post_id, title in posts.items()
    )
    return layout(f"f/{forum}", f"<ul>{items}</ul>")


def post_page(forum: str, post_id: int, title: str) -> str:
    return layout(title, f"<p id='post'>Post {post_id} in f/{escape(forum)}.</p>")


def websocket_page() -> str:
    return layout(
        "Live chat",
        """<p id="chat">connecting</p>
<script>
const socket = new WebSocket(location.origin.replace(/^http/, 'ws') + '/ws/echo');
socket.onopen = () => socket.send('hello');
socket.onmessage = (message) => {
  document.getElementById('chat').textContent = message.data;
  socket.close();
};
</script>""",
    )


def catalog_json(size: int) -> bytes:
    """A JSON document of about `size` bytes, for mitmproxy's `stream_large_bodies`."""
    item = {"sku": "XX-000", "name": "Filler item with a fairly long descriptive name", "price": 1.0}
    count = max(1, size // (len(json.dumps(item)) + 2))
    items = [{**item, "sku": f"XX-{n:06d}"} for n in range(count)]
    return json.dumps({"count": count, "items": items}).encode()


def not_found_page() -> str:
    return layout("Not found", "<p>No such page.</p>")


def product_json(product: Product) -> str:
    return json.dumps(
        {
            "id": product.product_id,
            "name": product.name,
            "sku": product.sku,
            "price": {"amount": product.price, "currency": "USD"},
            "stock": {"count": product.stock, "warehouse": "north"},
        }
    )


def cart_json(item: dict[str, object]) -> str:
    qty = item.get("qty")
    count = qty if isinstance(qty, int) else 0
    return json.dumps({"cart": {"count": count, "items": [item]}, "ok": True})
