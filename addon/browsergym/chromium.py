"""Playwright's Chromium replaced by the system's, for machines that cannot download it.

BrowserGym launches two browsers per episode: the task's (its `pw_chromium_kwargs` could name an
executable) and the chat window's, launched with Playwright's defaults only. Both find Chromium under
`PLAYWRIGHT_BROWSERS_PATH`, in the folder of the revision the installed Playwright expects; a folder
whose `chrome` is a link to the system's Chromium serves both.
"""

from __future__ import annotations

import json
import os
import tempfile
from importlib import resources
from pathlib import Path

SYSTEM_CHROMIUM = "/usr/bin/chromium"


def _chromium_revision() -> str:
    """The Chromium revision the installed Playwright driver looks for (its browsers.json)."""
    driver = resources.files("playwright") / "driver" / "package" / "browsers.json"
    browsers = json.loads(driver.read_text())["browsers"]
    return next(b["revision"] for b in browsers if b["name"] == "chromium")


def use_debian_chromium(chromium: str = SYSTEM_CHROMIUM, folder: str | Path | None = None) -> Path:
    """Point this process's Playwright at `chromium` (Debian's by default); returns the browsers folder.

    Call before Playwright starts in the process (BrowserGym starts it at the first `reset()`); child
    processes inherit the setting through the environment.
    """
    if not Path(chromium).exists():
        raise FileNotFoundError(f"no Chromium at {chromium}: install it (apt-get install chromium)")
    root = Path(folder) if folder else Path(tempfile.gettempdir()) / f"webarena-live-browsers-{os.getuid()}"
    target = root / f"chromium-{_chromium_revision()}" / "chrome-linux"
    target.mkdir(parents=True, exist_ok=True)
    link = target / "chrome"
    if link.is_symlink() and os.readlink(link) != chromium:
        link.unlink()
    if not link.is_symlink():
        link.symlink_to(chromium)
    # Playwright checks these markers, not the binary, to decide the browser is installed and its
    # host libraries were validated (the system's package manager saw to them).
    for marker in (target.parent / "INSTALLATION_COMPLETE", target.parent / "DEPENDENCIES_VALIDATED"):
        marker.touch()
    os.environ["PLAYWRIGHT_BROWSERS_PATH"] = str(root)
    return root


def playwright_has_chromium() -> bool:
    """Whether the Chromium the installed Playwright expects is in its browsers folder
    (`PLAYWRIGHT_BROWSERS_PATH`, else ~/.cache/ms-playwright): `playwright install chromium` was run."""
    folder = os.environ.get("PLAYWRIGHT_BROWSERS_PATH")
    root = Path(folder) if folder and folder != "0" else Path.home() / ".cache" / "ms-playwright"
    return (root / f"chromium-{_chromium_revision()}" / "chrome-linux" / "chrome").exists()


def some_chromium(chromium: str = SYSTEM_CHROMIUM) -> Path | None:
    """Playwright's own Chromium when it is installed (None: nothing to do), else the system's
    (`use_debian_chromium`), so a first run needs no `playwright install`; returns the folder set."""
    if playwright_has_chromium() or not Path(chromium).exists():
        return None
    return use_debian_chromium(chromium)
