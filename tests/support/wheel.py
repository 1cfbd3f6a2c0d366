"""The package as a user installs it: the wheel built from this checkout, in a fresh virtual environment.

The wheel is built once (`pip wheel --no-deps`) and installed without its dependencies into a new
venv whose own site-packages holds it; the dependencies are read from this test run's environment
(a `.pth` line naming its site-packages, which puts that folder on `sys.path` after the venv's own
and runs none of its `.pth` files, so the checkout's editable install is not seen). Commands run from
a folder outside the checkout with no `PYTHONPATH`: what answers is the installed package.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from tests.support.paths import REPO


@dataclass(frozen=True)
class InstalledWheel:
    """A fresh venv holding the wheel: its interpreter, its scripts folder and a folder to run in."""

    python: Path
    scripts: Path
    away: Path
    """A folder outside the checkout, the working directory of whatever runs."""

    def run(self, *command: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
        return subprocess.run(
            list(command), capture_output=True, text=True, timeout=timeout, cwd=self.away, env=env
        )


def install_wheel(work: Path) -> InstalledWheel:
    """Build the wheel of this checkout and install it into a new venv under `work`."""
    dist = work / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(dist), str(REPO)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    (wheel,) = dist.glob("webarena_live-*.whl")
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
         "--disable-pip-version-check", str(wheel)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True, timeout=60,
    ).stdout.strip()  # fmt: skip
    (Path(site) / "test_run_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    away = work / "away"
    away.mkdir()
    return InstalledWheel(python=python, scripts=venv / "bin", away=away)
