"""DokuWiki, as Debian packages it, run for the tests (and scripts/bench_pages.py) on a private copy of its
state.

The application code stays where `apt-get install dokuwiki` put it (/usr/share/dokuwiki) and
Debian's default configuration (/etc/dokuwiki) is copied; everything a run writes — configuration,
pages, media, the search index, PHP sessions — lives in a temporary directory, so a test never
touches /etc/dokuwiki or /var/lib/dokuwiki and every module starts from the same seeded wiki
(tests/wiki/pages/).

Debian's DokuWiki reads its configuration from /etc/dokuwiki unless the constants DOKU_CONF and
DOKU_MAIN_CONF are defined before it starts (its inc/preload.php only defines them when they are
not). PHP's built-in server does not run `auto_prepend_file` for a router script, so a two-line
router of ours defines them and hands over to DokuWiki's own router (index.php, written for
`php -S`). The command-line indexer gets the same constants through `auto_prepend_file`.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import requests

DOKUWIKI = Path("/usr/share/dokuwiki")
DEBIAN_CONF = Path("/etc/dokuwiki")
DATA_DIRS = (
    "pages",
    "attic",
    "media",
    "media_attic",
    "meta",
    "media_meta",
    "cache",
    "index",
    "locks",
    "tmp",
    "log",
)
PAGES = Path(__file__).resolve().parents[2] / "tests" / "wiki" / "pages"
INSTALL_HINT = (
    "DokuWiki is missing: run scripts/install_test_apps.sh as root (apt-get install dokuwiki php-cli)"
)

USER, PASSWORD = "ranger", "trail-pass"

# send404: a page that does not exist answers 404 (the default, 200, would hide the error the
# NOT_FOUND task is about). dnslookups: no reverse DNS for the change log (no network here).
# cachetime -1: no cache of rendered HTML. DokuWiki writes its caches in place, and HTML rendered
# while another request rewrote the parsed page's cache is stored without the page's text and
# served so until the page changes; without the HTML cache such a view is one bad view, which the
# agents load again (the parse cache, which cannot be turned off, is rewritten only when a page is).
LOCAL_CONF = """<?php
$conf['title'] = 'Trail Wiki';
$conf['savedir'] = '{data}';
$conf['useacl'] = 1;
$conf['superuser'] = '@admin';
$conf['send404'] = 1;
$conf['dnslookups'] = 0;
$conf['cachetime'] = -1;
"""

# Everybody reads; logged-in users may edit and upload (8 = upload, which includes edit).
ACL = "*\t@ALL\t1\n*\t@user\t8\n"


@dataclass(frozen=True)
class RunningWiki:
    base_url: str
    pid: int
    root: Path
    """The private copy: conf/, data/ and the server's log."""

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return (self.root / "server.log").read_text(errors="replace")[-chars:]
        except OSError:
            return "(no log)"


def installed() -> bool:
    return (DOKUWIKI / "doku.php").is_file() and shutil.which("php") is not None


def _user_line() -> str:
    # DokuWiki's plain-text auth accepts an unsalted md5 hex digest as a password hash; a test
    # account needs nothing stronger and this keeps the fixture free of a PHP call.
    digest = hashlib.md5(PASSWORD.encode()).hexdigest()
    return f"{USER}:{digest}:Robin Ranger:ranger@example.com:user\n"


def prepare(root: Path) -> Path:
    """Lay out the private conf/ and data/ under `root`; the PHP file defining the paths."""
    conf, data = root / "conf", root / "data"
    # Debian's ACL and user files are links into /var/lib/dokuwiki/acl, readable by root only:
    # leave them out, ours replace them.
    shutil.copytree(DEBIAN_CONF, conf, ignore=shutil.ignore_patterns("acl.auth.php", "users.auth.php"))
    (conf / "local.php").write_text(LOCAL_CONF.format(data=data))
    (conf / "acl.auth.php").write_text(ACL)
    (conf / "users.auth.php").write_text(_user_line())
    # An empty data directory (DokuWiki refuses to start without each of these) plus our pages;
    # nothing from Debian's /var/lib/dokuwiki/data, which only root may read.
    for name in DATA_DIRS:
        (data / name).mkdir(parents=True)
    shutil.copytree(PAGES, data / "pages", dirs_exist_ok=True)
    # Dated an hour back: DokuWiki parses a page again while its cache is not strictly newer than
    # the page's file and the configuration, and files written this second would be parsed afresh
    # on every view (rewriting the cache each time).
    past = time.time() - 3600
    for written in [*(data / "pages").rglob("*.txt"), *conf.iterdir()]:
        os.utime(written, (past, past))
    (root / "sessions").mkdir()
    paths = root / "paths.php"
    paths.write_text(
        "<?php\n"
        f"if (!defined('DOKU_MAIN_CONF')) define('DOKU_MAIN_CONF', '{conf}/');\n"
        f"if (!defined('DOKU_CONF')) define('DOKU_CONF', '{conf}/');\n"
    )
    (root / "router.php").write_text(
        f"<?php\nrequire '{paths}';\nreturn require '{DOKUWIKI / 'index.php'}';\n"
    )
    return paths


def build_search_index(root: Path, paths: Path) -> None:
    """Index the seeded pages now: DokuWiki indexes a page only after someone viewed it, and the
    search task must find pages nobody has opened yet."""
    done = subprocess.run(
        ["php", "-d", f"auto_prepend_file={paths}", str(DOKUWIKI / "bin" / "indexer.php"), "-q"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=root,
    )
    assert done.returncode == 0, f"DokuWiki's indexer failed: {done.stdout[-2000:]}{done.stderr[-2000:]}"


@contextmanager
def run_dokuwiki(root: Path, port: int, *, timeout: float = 20) -> Iterator[RunningWiki]:
    """Serve a fresh seeded DokuWiki on 127.0.0.1:`port` until the block ends."""
    paths = prepare(root)
    build_search_index(root, paths)
    log = (root / "server.log").open("wb")
    # Eight workers: two browser sessions at a time load pages, CSS and scripts side by side, and
    # the built-in server alone answers one request at a time.
    env = {**os.environ, "PHP_CLI_SERVER_WORKERS": "8"}
    command = [
        "php", "-d", f"session.save_path={root / 'sessions'}",
        "-S", f"127.0.0.1:{port}", "-t", str(DOKUWIKI), str(root / "router.php"),
    ]  # fmt: skip
    # Its own process group: the workers are forked children that outlive a killed parent (and
    # would keep the port), so teardown signals the whole group, found by the parent's PID.
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=root, env=env,
                               start_new_session=True)  # fmt: skip
    log.close()
    wiki = RunningWiki(f"http://127.0.0.1:{port}", process.pid, root)
    try:
        _wait_until_serving(wiki, process, timeout)
        render_every_page_once(wiki)
        yield wiki
    finally:
        _stop(process)


def _wait_until_serving(wiki: RunningWiki, process: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"php -S exited with {process.returncode}:\n{wiki.log_tail()}")
        try:
            reply = requests.get(f"{wiki.base_url}/doku.php?id=start", timeout=5)
            if reply.status_code == 200 and "Trail Wiki" in reply.text:
                return
        except requests.ConnectionError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"DokuWiki did not answer within {timeout}s:\n{wiki.log_tail()}")


def seeded_page_ids() -> list[str]:
    return sorted(":".join(path.relative_to(PAGES).with_suffix("").parts) for path in PAGES.rglob("*.txt"))


def render_every_page_once(wiki: RunningWiki) -> None:
    """View each seeded page once, one at a time, before any agent does. DokuWiki writes its
    caches in place (io_saveFile opens them with "wb"), and a view that reads a cache another
    request has just emptied shows the page without its text: seen in CI when two agents opened
    a page nobody had viewed yet. Parsed here, later views only read the parse cache until an
    agent's edit changes a page (the agents load a page shown without its text once more)."""
    for page_id in seeded_page_ids():
        reply = requests.get(f"{wiki.base_url}/doku.php?id={page_id}", timeout=30)
        assert reply.status_code == 200, f"{page_id}: {reply.status_code}\n{wiki.log_tail()}"


def _stop(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
