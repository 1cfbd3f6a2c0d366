"""`serve --ray` where Ray is not installed: one line naming the extra; and no module of the product
but the Ray engine imports Ray."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from webarena_live.launch import serve_command


def test_without_ray_the_flag_names_the_extra_and_nothing_imports_ray(tmp_path: Path) -> None:
    """Ray hidden from the interpreter (a path hook that refuses it), as where the extra is not
    installed: one line naming the extra, exit 2; and no module of the product but the Ray engine
    imports it."""
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text(
        "import sys\n"
        "class _NoRay:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'ray' or name.startswith('ray.'):\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, _NoRay())\n"
    )
    env = {**os.environ, "PYTHONPATH": str(hide)}
    command = [*serve_command(), "--workers", "2", "--ray", "auto"]
    run = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)
    assert run.returncode == 2, run.stdout + run.stderr
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert lines == [
        "webarena-live serve: --ray needs Ray, which is not installed: pip install 'webarena-live[ray]'"
    ]

    probe = (
        "import importlib, pkgutil, sys, webarena_live\n"
        "engine = {'webarena_live.ray', 'webarena_live.fleet.workers.ray_workers',\n"
        "          'webarena_live.fleet.workers.ray_actor'}\n"
        "for found in pkgutil.walk_packages(webarena_live.__path__, 'webarena_live.'):\n"
        "    if found.name in engine:\n"
        "        continue\n"
        "    try:\n"
        "        importlib.import_module(found.name)\n"
        "    except ImportError as error:  # an adapter of another extra that is not installed here\n"
        "        if \"pip install 'webarena-live[\" not in str(error) or '[ray]' in str(error):\n"
        "            raise\n"
        "print(sorted(name for name in sys.modules if name == 'ray' or name.startswith('ray.')))\n"
    )
    imported = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout.strip() == "[]"
