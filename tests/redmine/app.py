"""Redmine 5 as Debian packages it (`redmine`, `redmine-sqlite`, `puma`), run on a private instance.

Debian's Redmine takes its instance (database.yml, secret, files, logs, caches) from
`Redmine.root = /usr/share/redmine/instances/$REDMINE_INSTANCE`; a tenant name of `../` up to `/`
followed by an absolute directory makes that directory the instance, so nothing under /etc/redmine
or /var/lib/redmine is read or written. A Gemfile of the instance's own adds SQLite and puma to
Debian's and keeps Bundler's lock file there. The database is migrated and seeded once
(rakelib/webarena.rake), then puma serves it on 127.0.0.1 in a process group of its own.
Measured in docs/notes/live-findings.md ("Revalidation"): which Redmine pages answer 304.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.app_process import serving

APP = Path("/usr/share/redmine")
RAKELIB = Path(__file__).resolve().parent / "rakelib"
INSTALL_HINT = (
    "Redmine is missing: run scripts/install_test_apps.sh as root "
    "(apt-get install redmine redmine-sqlite puma)"
)
GEMFILE = """eval_gemfile '/usr/share/redmine/Gemfile'
gem 'sqlite3' unless dependencies.any? { |d| d.name == 'sqlite3' }
gem 'puma' unless dependencies.any? { |d| d.name == 'puma' }
"""


def _environment(instance: Path) -> dict[str, str]:
    return {
        **os.environ,
        "REDMINE_INSTANCE": "../../../../../.." + str(instance),  # Redmine.root is then `instance`
        "RAILS_ENV": "production",
        "BUNDLE_GEMFILE": str(instance / "Gemfile"),
    }


def make_instance(instance: Path) -> Path:
    """A migrated, seeded instance in `instance` (a minute at most on a busy machine)."""
    if not (APP / "config.ru").exists() or shutil.which("puma") is None:
        raise AssertionError(INSTALL_HINT)
    instance = instance.resolve()
    for folder in ("config", "db", "files", "log", "tmp/cache", "tmp/pids", "public/plugin_assets"):
        (instance / folder).mkdir(parents=True, exist_ok=True)
    (instance / "config" / "database.yml").write_text(
        f"production:\n  adapter: sqlite3\n  database: {instance / 'db' / 'redmine.sqlite3'}\n  pool: 5\n"
        "  timeout: 5000\n"
    )
    (instance / "config" / "secret_key.txt").write_text(secrets.token_hex(32))
    (instance / "Gemfile").write_text(GEMFILE)
    with (instance / "log" / "setup.out").open("wb") as log:
        subprocess.run(
            ["bundle", "exec", "rake", "-R", str(RAKELIB), "webarena:setup"],
            cwd=APP, env=_environment(instance), stdout=log, stderr=subprocess.STDOUT,
            check=True, timeout=600,
        )  # fmt: skip
    return instance


@contextmanager
def running_redmine(instance: Path, port: int, *, timeout: float = 180) -> Iterator[str]:
    """puma serving `instance` on 127.0.0.1:`port`; its base URL once /login answers."""
    bind = f"tcp://127.0.0.1:{port}"
    command = ["bundle", "exec", "puma", "-b", bind, "-e", "production", "-t", "1:4", "config.ru"]
    base = f"http://127.0.0.1:{port}"
    log = instance / "log" / "puma.out"
    with serving(command, f"{base}/login", log, timeout=timeout, poll=0.2, grace=15, cwd=APP,
                 env=_environment(instance)):  # fmt: skip
        yield base
