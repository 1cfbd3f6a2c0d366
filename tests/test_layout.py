"""The house: a room per concern, arrows that run one way, and a build that maps the folders.

docs/architecture.md draws it; `[tool.importlinter]` in pyproject.toml states the arrows. These tests
check that the contracts hold on the tree and really break when an arrow runs the wrong way.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
FOLDERS = {"webarena_live": "addon", "webarena_live.evaluator": "evaluator"}
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
    shutil.copytree(REPO / "addon", top, ignore=shutil.ignore_patterns("__pycache__"), symlinks=True)
    shutil.copytree(REPO / "evaluator", top / "evaluator", ignore=shutil.ignore_patterns("__pycache__"))
    return root


WRONG_ARROWS = [
    ("evaluator/tasks.py", "import mitmproxy", "The evaluator is pure"),
    ("runs/journal.py", "import fastapi", "Runs and addresses import neither"),
    ("control/guard.py", "import mitmproxy.http", "The control API imports neither mitmproxy"),
    ("runs/outputs.py", "from webarena_live.control import guard", "The layers"),
    ("proxy/capture.py", "from webarena_live.fleet import router", "The layers"),
    (
        "control/app.py",
        "from webarena_live.client import Client",
        "The server never depends on its own client",
    ),
    ("client.py", "from webarena_live.runs import journal", "The client is the control API's"),
    ("ray.py", "from webarena_live.proxy import options", "The Ray face is thin"),
    ("fleet/front/front.py", "import ray", "Ray only where --ray runs"),
    ("proxy/sizes.py", "from webarena_live.demo import catalog", "Nothing but the CLI imports"),
    ("proxy/sizes.py", "from webarena_live.evaluator.memo import BoundedMemo", "exported names only"),
    ("rewards/scoring.py", "from webarena_live.runs import journal", "Rewards are what any client"),
    ("control/app.py", "from webarena_live.rewards import score", "Only the CLI and BrowserGym's"),
]


@pytest.mark.parametrize(("module", "line", "contract"), WRONG_ARROWS, ids=[w[2] for w in WRONG_ARROWS])
def test_an_arrow_the_wrong_way_breaks_its_contract(tmp_path, module, line, contract):
    root = _namespace_copy(tmp_path)
    target = root / "webarena_live" / module
    target.write_text(target.read_text() + f"\n{line}  # the wrong way\n")
    done = lint_imports(root)
    assert done.returncode != 0, done.stdout
    broken = [row for row in done.stdout.splitlines() if " BROKEN" in row]
    assert any(contract in row for row in broken), done.stdout


def test_one_rule_maps_an_import_to_its_folder():
    setuptools = PYPROJECT["tool"]["setuptools"]
    assert setuptools["package-dir"] == FOLDERS
    assert "packages" not in setuptools  # found by setuptools in the two folders, no list to keep
    assert not (REPO / "__init__.py").exists() and not (REPO / "setup.py").exists()
    assert (REPO / "addon" / "tasks").is_symlink() and (REPO / "addon" / "tasks").resolve() == REPO / "tasks"
    for init in (REPO / "addon").rglob("__init__.py"):
        parts = init.parent.relative_to(REPO / "addon").parts
        name = ".".join(("webarena_live", *parts))
        try:
            origin = importlib.import_module(name).__file__
        except ImportError as error:  # a package of an extra not installed here: where it would load from
            assert "pip install 'webarena-live[" in str(error), error
            origin = importlib.util.find_spec(name).origin  # type: ignore[union-attr]
        assert Path(origin or "").resolve().parent == init.parent.resolve(), name


def test_the_wheel_holds_every_module_and_the_task_files(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(tmp_path), str(REPO)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    (wheel,) = tmp_path.glob("webarena_live-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {f"webarena_live/{p.relative_to(REPO / 'addon')}" for p in (REPO / "addon").rglob("*.py")}
    expected |= {
        f"webarena_live/evaluator/{p.relative_to(REPO / 'evaluator')}"
        for p in (REPO / "evaluator").rglob("*.py")
    }
    expected |= {f"webarena_live/tasks/{p.name}" for p in (REPO / "tasks").glob("*.json")}
    assert expected <= names, sorted(expected - names)
    assert {name.split("/")[0] for name in names} == {
        "webarena_live",
        wheel.name.split("-")[0] + "-" + wheel.name.split("-")[1] + ".dist-info",
    }
    assert not [name for name in names if "__pycache__" in name]


def test_each_room_of_the_addon_says_what_it_owns_and_may_import():
    modules = sorted(path.name for path in (REPO / "addon").glob("*.py"))
    top = ["__init__.py", "client.py", "client_calls.py", "entry.py", "launch.py", "ray.py"]
    assert modules == top, modules
    rooms = [path.parent for path in (REPO / "addon").glob("*/__init__.py")]
    assert {room.name for room in rooms} == {
        "addresses",
        "proxy",
        "runs",
        "control",
        "demo",
        "commands",
        "fleet",
        "rewards",
        "replicas",
        "browsergym",
        "sites",
        "mcp_server",
    }
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


_NAMED_FILE = re.compile(
    r"(?<![\w./-])((?:addon|evaluator|tests|scripts|examples|docs|proxy|runs|control|fleet|commands|demo"
    r"|addresses|support|conformance|site|wiki|e2e)/(?:[\w-]+/)*[\w-]+\.(?:py|md|sh|json))\b"
)


def test_every_file_the_code_names_exists():
    """A docstring or comment that points at a file points at one that is there (from the root, from
    `addon/` as the import rule reads, or from `tests/`)."""
    tracked = subprocess.run(["git", "ls-files"], capture_output=True, text=True, cwd=REPO, check=True)
    roots = (REPO, REPO / "addon", REPO / "tests")
    missing = [
        f"{name}:{number}: {found}"
        for name in tracked.stdout.splitlines()
        if name.endswith((".py", ".sh", ".toml")) and (REPO / name).is_file()
        for number, text in enumerate((REPO / name).read_text(errors="replace").splitlines(), start=1)
        for found in _NAMED_FILE.findall(text)
        if not any((root / found).exists() for root in roots)
    ]
    assert missing == []


@pytest.mark.parametrize("script", sorted(p.name for p in (REPO / "scripts").glob("*.py")))
def test_every_script_starts_from_the_checkout(script):
    """The developer scripts import what they use from where it now is (`--help` loads every import)."""
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / script), "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]


def _unnamed_modules(doc: str) -> list[str]:
    """The modules `test_the_map_names_every_module`'s rule finds nowhere in `doc`."""
    rows = [line for line in doc.splitlines() if line.startswith("| `")]
    missing = []
    for path in sorted([*(REPO / "addon").rglob("*.py"), *(REPO / "evaluator").rglob("*.py")]):
        if path.name.startswith("_") or "__pycache__" in path.parts:
            continue
        relative = path.relative_to(REPO)
        in_room = relative.parts[0] == "addon" and len(relative.parts) > 2  # `proxy/capture`, not `addon/...`
        named = (relative.relative_to("addon") if in_room else relative).with_suffix("").as_posix()
        by_path = re.search(rf"(?<![\w.-]){re.escape(named)}(?:\.py)?(?![\w-])", doc)
        room = f"| `{relative.parent.as_posix()}` |"
        in_row = any(row.startswith(room) and f"`{path.stem}`" in row.split(" | ")[1] for row in rows)
        if not by_path and not in_row:
            missing.append(relative.as_posix())
    return missing


def test_the_map_names_every_module():
    """docs/architecture.md names every module of `addon/` and `evaluator/` (but `__init__.py`,
    `__main__.py` and files starting with `_`), so a module added is a module placed on the map.

    The rule: a module is named by its path from its top folder (`proxy/capture.py`, or `proxy/capture`;
    `evaluator/trace.py`; `addon/client.py` for a module at the package's top) anywhere in the note, or as
    `` `capture` `` in the "owns" cell of its folder's row of the Rooms table (the row whose first cell is
    `` `addon/proxy` ``, `` `evaluator` ``, `` `evaluator/values` ``)."""
    doc = (REPO / "docs" / "architecture.md").read_text()
    missing = _unnamed_modules(doc)
    assert not missing, "docs/architecture.md does not name " + ", ".join(missing)


def _source_files(*suffixes: str) -> list[Path]:
    """The repository's own files of those suffixes (no venv, build or cache)."""
    roots = ("addon", "evaluator", "scripts", "tests", "examples", "docs")
    return sorted(
        path
        for root in roots
        for path in (REPO / root).rglob("*")
        if path.suffix in suffixes and "__pycache__" not in path.parts and path.is_file()
    )


def test_nothing_cites_a_design_document_outside_the_repository():
    """The contract the project was built to lives outside the repository: code and pages cite the
    project's own docs/ instead, which a reader has."""
    cited = re.compile("DESIGN" + r"\.md")  # spelled apart, or this file would cite it
    offenders = [
        f"{path.relative_to(REPO)}:{number}"
        for path in _source_files(".py", ".sh", ".md", ".js", ".html", ".json")
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), start=1)
        if cited.search(line)
    ]
    assert offenders == []


def architecture_sections() -> set[str]:
    doc = (REPO / "docs" / "architecture.md").read_text()
    return {line[3:].strip() for line in doc.splitlines() if line.startswith("## ")}


def architecture_citations(text: str) -> list[str]:
    """What each `docs/architecture.md, SECTION` citation in `text` names, a line break or a comment's
    `#` inside it read as a space; the name runs to the first `)`, `.`, `:` or `;`."""
    flat = re.sub(r"\s*\n\s*(?:#\s*)?", " ", text)
    return [name.strip() for name in re.findall(r"docs/architecture\.md, ([^).:;`]+)", flat)]


def cited_sections_missing(name: str, sections: set[str]) -> list[str]:
    """The sections a citation names that the note does not have (`Workers and Ray` names two)."""
    if name in sections:
        return []
    return [part for part in re.split(r", | and ", name) if part not in sections]


def test_every_citation_of_the_architecture_note_names_one_of_its_sections():
    sections = architecture_sections()
    assert {"Capture", "Workers", "Ray", "Replicas", "The finish", "Rooms and arrows"} <= sections
    missing = [
        f"{path.relative_to(REPO)}: {name!r}"
        for path in _source_files(".py", ".sh", ".md")
        if path != Path(__file__)  # the rule's own examples, below
        for name in architecture_citations(path.read_text(errors="replace"))
        if cited_sections_missing(name, sections)
    ]
    assert missing == [], f"sections of docs/architecture.md: {sorted(sections)}"


def test_the_citation_rule_reads_what_the_code_writes():
    """The rule above finds citations across a docstring's line break and names each missing part."""
    text = "x (docs/architecture.md,\n    Workers and Ray). y docs/architecture.md, Replicas and leases."
    assert architecture_citations(text) == ["Workers and Ray", "Replicas and leases"]
    sections = {"Workers", "Ray", "Replicas", "Rooms and arrows"}
    assert cited_sections_missing("Workers and Ray", sections) == []
    assert cited_sections_missing("Rooms and arrows", sections) == []
    assert cited_sections_missing("Replicas and leases", sections) == ["leases"]


def test_no_script_imports_the_tests():
    """The developer scripts stand on the package and on each other, never on the test suite's helpers:
    what a benchmark and a test share lives in the package or in scripts/support/ (the conformance
    corpus, the real-shaped applications), which imports no test either."""
    importing = set()
    for path in sorted((REPO / "scripts").rglob("*.py")):  # with what scripts/support/ shares with the tests
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            if any(name.split(".")[0] == "tests" for name in names):
                importing.add(str(path.relative_to(REPO / "scripts")))
    assert sorted(importing) == []


def test_the_scripts_import_no_cycle():
    """No script imports a script that imports it back, however many steps apart."""
    scripts = {path.stem: path for path in (REPO / "scripts").glob("*.py")}
    imports: dict[str, set[str]] = {}
    for name, path in scripts.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                found.add(node.module or "")
        imports[name] = found & set(scripts)

    def reaches(start: str, goal: str, seen: frozenset[str] = frozenset()) -> bool:
        return any(
            nxt == goal or (nxt not in seen and reaches(nxt, goal, seen | {nxt})) for nxt in imports[start]
        )

    assert [name for name in sorted(scripts) if reaches(name, name)] == []
