"""A small ZIM file (python-libzim's writer) served by kiwix-serve 3.3 from Debian's kiwix-tools.

kiwix-serve is what WebArena's wikipedia site runs. It serves a book `NAME.zim` at `/NAME/<Path>`
(`/NAME` redirects to the main page) and sends every article and resource with
`Cache-Control: max-age=2723040, public` and an `ETag` of the server's start time: a browser with
its cache on takes a visited article from its cache without a request when it follows a link or goes
back, and revalidates it on a reload, which kiwix-serve answers with `304 Not Modified`
(docs/notes/live-findings.md, "Revalidation").
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.app_process import serving

KIWIX_SERVE = "kiwix-serve"
INSTALL_HINT = (
    "kiwix-serve is missing: run scripts/install_test_apps.sh as root (apt-get install kiwix-tools)"
)
BOOK = "trailwiki"

ARTICLES = {
    "Main_Page": ("Trail Wiki", '<p>Trails: <a id="to-falcon" href="Falcon_Crag">Falcon Crag</a>, '
                                '<a id="to-ridge" href="Ridge_Loop">Ridge Loop</a>.</p>'),
    "Falcon_Crag": ("Falcon Crag", '<p id="fact">Falcon Crag rises 1,204 m above the lake. '
                                   '<a id="to-ridge" href="Ridge_Loop">Ridge Loop</a> starts below.</p>'),
    "Ridge_Loop": ("Ridge Loop", '<p id="fact">The Ridge Loop is 14 km long. '
                                 '<a id="to-falcon" href="Falcon_Crag">Falcon Crag</a> overlooks it.</p>'),
}  # fmt: skip


def build_zim(path: Path) -> Path:
    """Write the book's ZIM file (three articles, a stylesheet, the metadata kiwix-serve needs)."""
    from libzim.writer import Creator, Hint, Item, StringProvider  # the test extra's libzim

    class Entry(Item):  # type: ignore[misc]
        def __init__(self, entry_path: str, title: str, mimetype: str, content: str, *, front: bool) -> None:
            super().__init__()
            self.entry_path, self.title, self.mimetype, self.content, self.front = (
                entry_path, title, mimetype, content, front,
            )  # fmt: skip

        def get_path(self) -> str:
            return self.entry_path

        def get_title(self) -> str:
            return self.title

        def get_mimetype(self) -> str:
            return self.mimetype

        def get_contentprovider(self) -> StringProvider:
            return StringProvider(self.content)

        def get_hints(self) -> dict[Hint, bool]:
            return {Hint.FRONT_ARTICLE: self.front, Hint.COMPRESS: True}

    path.parent.mkdir(parents=True, exist_ok=True)
    with Creator(str(path)) as creator:
        creator.set_mainpath("Main_Page")
        for entry_path, (title, body) in ARTICLES.items():
            page = (f'<!doctype html><html><head><meta charset="utf-8"><title>{title}</title>'
                    f'<link rel="stylesheet" href="style.css"></head><body><h1 id="title">{title}</h1>{body}'
                    "</body></html>")  # fmt: skip
            creator.add_item(Entry(entry_path, title, "text/html", page, front=True))
        creator.add_item(Entry("style.css", "", "text/css", "body{font-family:sans-serif}", front=False))
        for name, value in {"Name": BOOK, "Title": "Trail Wiki", "Creator": "webarena-live tests",
                            "Publisher": "webarena-live tests", "Description": "the trails of the park",
                            "Language": "eng", "Date": "2026-01-01"}.items():  # fmt: skip
            creator.add_metadata(name, value)
    return path


@contextmanager
def running_kiwix(zim: Path, port: int, *, timeout: float = 20) -> Iterator[str]:
    """kiwix-serve on 127.0.0.1:`port` serving `zim`, in a process group of its own; its base URL."""
    if shutil.which(KIWIX_SERVE) is None:
        raise AssertionError(INSTALL_HINT)
    base = f"http://127.0.0.1:{port}"
    command = [KIWIX_SERVE, "--address", "127.0.0.1", "--port", str(port), str(zim)]
    with serving(
        command, f"{base}/{BOOK}/Main_Page", zim.parent / "kiwix-serve.log", timeout=timeout, poll=0.05
    ):
        yield base
