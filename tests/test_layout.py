"""The house: a room per concern, arrows that run one way, and a build that maps the folders.

docs/architecture.md draws it; `[tool.importlinter]` in pyproject.toml states the arrows. These tests
check that the contracts hold on the tree and really break when an arrow runs the wrong way.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
FOLDERS = {"webarena_live": "package", "webarena_live.addon": "addon", "webarena_live.evaluator": "evaluator"}
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(namespace_parent: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "400"}  # one line per contract in its report
    if namespace_parent is not None:
        env["PYTHONPATH"] = str(namespace_parent)  # ahead of the installed package
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--config", str(REPO / "pyproject.toml")],
        capture_output=True, text=True, cwd=REPO, env=env, timeout=120,
    )  # fmt: skip


def test_the_import_contracts_hold_on_the_tree():
    done = lint_imports()
    assert done.returncode == 0, done.stdout + done.stderr
    assert "BROKEN" not in done.stdout and "KEPT" in done.stdout, done.stdout


def _namespace_copy(root: Path) -> Path:
    """The import package as the build maps it, in `root/webarena_live`."""
    top = root / "webarena_live"
    shutil.copytree(REPO / "package", top)
    for sub in ("addon", "evaluator"):
        shutil.copytree(REPO / sub, top / sub, ignore=shutil.ignore_patterns("__pycache__"))
    return root


WRONG_ARROWS = [
    ("evaluator/tasks.py", "import mitmproxy", "The evaluator is pure"),
    ("addon/runs/journal.py", "import fastapi", "Runs import neither mitmproxy nor FastAPI"),
    ("addon/control/guard.py", "import mitmproxy.http", "The control API never imports mitmproxy"),
    ("addon/runs/outputs.py", "from webarena_live.addon.control import guard", "The addon's layers"),
    ("addon/proxy/sizes.py", "from webarena_live.addon.demo import catalog", "Nothing but the CLI imports"),
    ("addon/proxy/sizes.py", "from webarena_live.evaluator.memo import BoundedMemo", "exported names only"),
]


@pytest.mark.parametrize(("module", "line", "contract"), WRONG_ARROWS, ids=[w[2] for w in WRONG_ARROWS])
def test_an_arrow_the_wrong_way_breaks_its_contract(tmp_path, module, line, contract):
    root = _namespace_copy(tmp_path)
    target = root / "webarena_live" / module
    target.write_text(target.read_text() + f"\n{line}  # the wrong way\n")
    done = lint_imports(root)
    assert done.returncode != 0, done.stdout
    broken = [row for row in done.stdout.splitlines() if row.rstrip().endswith("BROKEN")]
    assert any(contract in row for row in broken), done.stdout


def test_the_build_maps_the_folders_and_lists_every_package():
    setuptools = PYPROJECT["tool"]["setuptools"]
    assert setuptools["package-dir"] == {**FOLDERS, "webarena_live.tasks": "tasks"}
    found = {"webarena_live.tasks"}
    for package, folder in FOLDERS.items():
        for init in (REPO / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(REPO / folder).parts
            found.add(".".join((package, *parts)))
    assert sorted(setuptools["packages"]) == sorted(found)
    assert not (REPO / "__init__.py").exists() and not (REPO / "setup.py").exists()


def test_each_room_of_the_addon_says_what_it_owns_and_may_import():
    modules = sorted(path.name for path in (REPO / "addon").glob("*.py"))
    assert len(modules) <= 12, modules
    rooms = [path.parent for path in (REPO / "addon").glob("*/__init__.py")]
    assert {room.name for room in rooms} >= {"proxy", "runs", "control", "demo", "commands", "fleet"}
    for room in rooms:
        docstring = ast.get_docstring(ast.parse((room / "__init__.py").read_text())) or ""
        assert "Owns" in docstring and "May import" in docstring, room


def test_no_code_points_at_an_issue_number_or_a_document_outside_the_repository():
    tracked = subprocess.run(["git", "ls-files"], capture_output=True, text=True, cwd=REPO, check=True)
    pointer = re.compile(r"\b[Ii]ssue #?\d+|DESIGN" + " §")  # spelled apart, or this line would match
    code = (".py", ".sh", ".js", ".html", ".css", ".toml")
    offenders = [
        f"{name}:{number}"
        for name in tracked.stdout.splitlines()
        if name.endswith(code) and (REPO / name).is_file()
        for number, text in enumerate((REPO / name).read_text(errors="replace").splitlines(), start=1)
        if pointer.search(text)
    ]
    assert offenders == []
