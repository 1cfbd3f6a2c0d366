"""The Demo Shop's catalog and pages: its products and search, and the templates its pages are made from
(`demo/site.py` serves them).

Templates are `string.Template` files shipped as package data; values are
HTML-escaped unless already rendered (`Markup`).
"""

from __future__ import annotations

import functools
import html
import json
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from string import Template
from typing import Any
from urllib.parse import quote, unquote

ASSETS: Traversable = resources.files("webarena_live.demo") / "site_assets"
"""Templates, static files and the catalog, shipped as package data."""
MESSAGES_COOKIE = "shop-messages"
"""Flash messages travel in this cookie (URL-encoded JSON) across the POST-redirect-GET."""


@dataclass(frozen=True)
class Product:
    id: int
    slug: str
    name: str
    price: float
    category: str
    color: str
    description: str
    reviews: tuple[dict[str, Any], ...]

    @property
    def path(self) -> str:
        return f"/{self.slug}.html"

    def matches(self, query: str) -> bool:
        """Every word of the query appears in the name, description or category."""
        text = f"{self.name} {self.description} {self.category}".lower()
        return all(word in text for word in query.lower().split())


def load_catalog(path: Traversable = ASSETS / "catalog.json") -> tuple[str, tuple[Product, ...]]:
    """The shop's name and products, from the catalog file."""
    data = json.loads(path.read_text(encoding="utf-8"))
    products = tuple(Product(**{**item, "reviews": tuple(item["reviews"])}) for item in data["products"])
    return data["shop_name"], products


def money(value: float) -> str:
    return f"${value:,.2f}"


def search(products: Sequence[Product], query: str, order: str = "", direction: str = "asc") -> list[Product]:
    """Products matching `query`, in catalog order unless sorted by `price` or `name`."""
    found = [p for p in products if query.strip() and p.matches(query)]
    if order in ("price", "name"):
        found.sort(key=lambda p: getattr(p, order), reverse=direction == "desc")
    return found


class Markup(str):
    """HTML that is already safe to insert (rendered templates)."""

    __slots__ = ()


@functools.cache
def _template(name: str, suffix: str) -> Template:
    return Template((ASSETS.joinpath("templates", f"{name}{suffix}")).read_text(encoding="utf-8"))


def render(template: str, /, *, suffix: str = ".html", **values: Any) -> str:
    """Fill `template`; values are HTML-escaped unless passed pre-rendered as `Markup`."""
    escaped = {
        key: value if isinstance(value, Markup) else html.escape(str(value)) for key, value in values.items()
    }
    return _template(template, suffix).substitute(escaped)


def cards(products: Sequence[Product]) -> Markup:
    return Markup(
        "".join(render("card", path=p.path, id=p.id, name=p.name, price=money(p.price)) for p in products)
    )


def flash_cookie(text: str, kind: str = "success") -> str:
    value = quote(json.dumps([{"type": kind, "text": text}]), safe="")
    return f"{MESSAGES_COOKIE}={value}; Path=/; SameSite=Lax"


def flash_html(raw: str) -> Markup:
    try:
        items = json.loads(unquote(raw))
    except json.JSONDecodeError:
        return Markup()
    parts = [
        render("message", kind=m.get("type", ""), text=m.get("text", ""))
        for m in items
        if isinstance(items, list) and isinstance(m, dict)
    ]
    return Markup("".join(parts))
