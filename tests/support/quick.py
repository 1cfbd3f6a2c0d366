"""The quick selection (`scripts/bootstrap.sh test --quick`, i.e. `pytest -p tests.support.quick`): every
test but those that start a browser, drive a real application, start Ray or make machines.

The rule reads the code, so a new browser test leaves the quick run by itself and there is no list to
keep. A *heavy* piece of code is a top-level function or class of a test module or of a module of
`tests` that launches a browser (Playwright, Selenium, Chromium's binary) or imports Ray, or that uses
(by name, or as a fixture) another heavy piece; everything in the real and real-shaped applications
(`tests/wiki`, `tests/kiwix`, `tests/redmine`, `tests/gitlab`) and in the machines made of network
namespaces (`tests/support/netns.py`) is heavy, and a module whose top level is heavy is heavy as a
whole. Starting a container engine (`podman`: tests/support/engines.py) is heavy too, so every test
using the engine fixtures of tests/containers/conftest.py is. A test is left out when its function (its
class, for a method) or a fixture it uses is heavy, and so is every test in `tests/e2e` (real browsers
on real sites) and `tests/browsergym` (its own venv). What stays is every package's unit tests, the
tests that start `webarena-live serve` itself, and the parity corpora judged by the reference.

To keep the quick run under five minutes on two cores, the slow kinds of `serve` test are left out the
same way, by the code (`SLOW`): a fleet (`"--workers"` in the test, a helper or fixture it uses, or a
parameter of it or of its fixture: the one-process parameter of the same test stays), a `serve` killed
with SIGKILL and started again on what it left, a benchmark beside another tree exported from git, and
the package's wheel built and installed (`tests/support/wheel.py`: the quick run needs no wheel). The
parity corpora stay, smaller: `sample` keeps every `STRIDE`-th case of each kind of case (a mutation, a
variant, an answer label), counted from the first in the corpus' own order, so every kind is still
judged against the reference and the same cases are chosen every run; `share` scales the corpora's
floors on how many verdicts of each status they must give, and `examples` gives Hypothesis a fifth of
its examples. The full run (no plugin: `running()` is false) is unchanged, every case and example.
"""

from __future__ import annotations

import ast
import functools
import inspect
import re
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from pathlib import Path
from typing import TypeVar

import pytest

TESTS = Path(__file__).resolve().parent.parent
LEFT_OUT_FOLDERS = {"e2e": "real browsers on real sites", "browsergym": "BrowserGym's own venv"}
APPLICATIONS = {"wiki", "kiwix", "redmine", "gitlab"}
MACHINES = {"support/netns.py"}
RAY = re.compile(r"\bray\b")
HEAVY = re.compile(
    r"sync_playwright|async_playwright|/usr/bin/chromium|\.launch\(|webdriver\.Chrome|puppeteer"
    r"|^\s*(?:import ray|from ray\b)|ray\.init\(|\bray_machines\b"
    r'|"demo", "--(?:output-dir|chromium)"|CLI\), "demo"'  # `webarena-live demo` drives Chromium
    r'|"netns"'  # `ip netns ...`: machines made of network namespaces
    r'|"podman"'  # a container engine (tests/support/engines.py) and the containers made through it
    r"|@playwright/mcp|chrome-devtools-mcp|\.npm-tools",  # MCP browser servers: they launch Chromium
    re.M,
)


WHOLE = "*"
"""The key of a module's reasons under which the module is heavy as a whole."""
_reading: set[Path] = set()


@functools.cache
def heavy_names(path: Path) -> dict[str, str]:
    """The heavy top-level names of the module at `path`, each with why (`WHOLE`: the module)."""
    _reading.add(path)
    try:
        return _read(path)
    finally:
        _reading.discard(path)


def _read(path: Path) -> dict[str, str]:
    relative = path.relative_to(TESTS)
    if relative.parts[0] in LEFT_OUT_FOLDERS or relative.parts[0] in APPLICATIONS:
        return {WHOLE: f"tests/{relative.parts[0]}"}
    if relative.as_posix() in MACHINES:
        return {WHOLE: f"tests/{relative.as_posix()}: machines made of network namespaces"}
    if relative.as_posix() in SLOW_MODULES:
        return {WHOLE: f"tests/{relative.as_posix()}: {SLOW_MODULES[relative.as_posix()]}"}
    text = path.read_text()
    defs: dict[str, ast.AST] = {}
    heavy: dict[str, str] = {}
    imported: dict[str, tuple[Path, str | None]] = {}  # local name -> (module, its name there or None)
    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defs[node.name] = node
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tests"):
            for alias in node.names:
                module = _module_file(f"{node.module}.{alias.name}")
                source = _module_file(node.module or "")
                if module is not None or source is not None:
                    where = (module, None) if module is not None else (source, alias.name)
                    imported[alias.asname or alias.name] = where  # type: ignore[assignment]
        if isinstance(node, ast.ImportFrom):
            heavy |= shared_applications(node)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        found = _heavy_or_slow(ast.get_source_segment(text, node) or "", node)
        if not found:
            continue
        why = f"{relative} says {found.group(0).strip()!r}"
        if isinstance(node, ast.Import | ast.ImportFrom) and not RAY.search(found.group(0)):
            heavy |= {alias.asname or alias.name.split(".")[0]: why for alias in node.names}
        elif isinstance(node, ast.Assign | ast.AnnAssign):  # a constant: whoever uses it is heavy
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            heavy |= {target.id: why for target in targets if isinstance(target, ast.Name)}
        else:  # Ray imported, or a browser started, by the module itself
            return {WHOLE: why}
    for local, (module, name) in imported.items():
        if name and (why := _why(module, name)):
            heavy[local] = why
    uses = {}
    for name, node in defs.items():
        uses[name], through = _uses(node, imported)
        if found := _heavy_or_slow(ast.get_source_segment(text, node) or "", node):
            heavy[name] = f"{relative}: {name} says {found.group(0).strip()!r}"
        elif through:
            heavy[name] = through
    changed = True
    while changed:  # a piece that uses a heavy piece is heavy
        changed = False
        for name, used in uses.items():
            if name not in heavy and (reached := sorted(used & set(heavy))):
                heavy[name] = heavy[reached[0]]
                changed = True
    return heavy


# --- what the tests share with the benchmarks (scripts/support/): heavy as it was in tests/ ---------------

SHARED_HEAVY: dict[str, frozenset[str] | None] = {
    "scripts.support.wiki_app": None,  # DokuWiki, a real application (as tests/wiki)
    "scripts.support.gitlab_app": None,  # the GitLab-shaped site (as tests/gitlab)
    "scripts.support.engines": frozenset({"Engine", "start_engine"}),  # podman's service
}
"""The modules of scripts/support/ the tests import (no script imports `tests`), each with its heavy
names (None: all of it): whatever imports a heavy one is heavy, as when it was a module of `tests`."""


def shared_applications(node: ast.ImportFrom) -> dict[str, str]:
    """The heavy names `node` imports from (or as) a module of `SHARED_HEAVY`, each with why."""
    module, found = node.module or "", {}
    for alias in node.names:
        source, name = (module, alias.name) if module in SHARED_HEAVY else (f"{module}.{alias.name}", None)
        if source not in SHARED_HEAVY:
            continue
        names = SHARED_HEAVY[source]
        if names is None or name in names:
            found[alias.asname or alias.name] = f"{source}: {name or 'the module'} is heavy"
    return found


# --- the slow kinds of `serve` test, and smaller corpora: what keeps the quick run under five minutes -------

SLOW = re.compile(
    r'"--workers"|\bLocalWorkers\('  # a fleet: a front and its worker processes, each a `serve`
    r"|\bSIGKILL\b"  # a `serve` (or a worker) killed mid-run, then started again on what it left
    r'|"--other", "HEAD"',  # a benchmark run beside another tree, exported from git and started too
)
SLOW_MODULES = {"support/wheel.py": "the package's wheel, built and installed in a fresh venv"}
"""Modules of `tests` whose every piece is slow (a quick run needs no wheel), as `MACHINES`."""
STRIDE = 8
"""A quick run judges every `STRIDE`-th case of each kind of a parity corpus (`sample`)."""
T = TypeVar("T")
_running = False
"""Whether this process runs the quick selection (set when pytest loads this module as its plugin)."""


def _heavy_or_slow(source: str, node: ast.AST) -> re.Match[str] | None:
    """What makes the piece `node` (its `source`) heavy or slow; a module's docstring is read for the
    heavy only (a slow kind of test it describes is found in the tests themselves)."""
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
        return HEAVY.search(source)
    return HEAVY.search(source) or SLOW.search(source)


def slow_parameter(item: pytest.Item) -> str | None:
    """Why `item` is slow by one of its parameters (a fixture's or its own: `("--workers", "2")`)."""
    callspec = getattr(item, "callspec", None)
    for name, value in callspec.params.items() if callspec is not None else ():
        values = value if isinstance(value, tuple | list) else (value,)
        if any(isinstance(part, str) and SLOW.search(f'"{part}"') for part in values):
            return f"parameter {name}={value!r}: a fleet of `serve` workers"
    return None


def running() -> bool:
    """Whether this is a quick run (tests/support/quick.py loaded as pytest's plugin)."""
    return _running


def sample(cases: Sequence[T], kind: Callable[[T], Hashable], *, quick: bool | None = None) -> list[T]:
    """`cases` whole in the full run; in a quick run (`quick` says, else `running()`) every
    `STRIDE`-th case of each kind, counted in the given order from its first, so every kind keeps at
    least one case and the same cases are chosen every run."""
    if not (running() if quick is None else quick):
        return list(cases)
    seen: Counter[Hashable] = Counter()
    chosen = []
    for case in cases:
        if seen[key := kind(case)] % STRIDE == 0:
            chosen.append(case)
        seen[key] += 1
    return chosen


def share(count: int) -> int:
    """A floor on how many cases of a corpus give some verdict, for the cases `sample` keeps."""
    return count // STRIDE if running() else count


def examples(count: int) -> int:
    """Hypothesis's `max_examples`: `count` in the full run, a fifth of it (at least 5) in a quick run."""
    return max(5, count // 5) if running() else count


def _uses(node: ast.AST, imported: dict[str, tuple[Path, str | None]]) -> tuple[set[str], str | None]:
    """The names a piece refers to, and why when it uses a heavy piece of an imported module
    (`harness.launch(...)` after `from tests.site import harness`)."""
    names, heavy = set(), None
    for child in ast.walk(node):
        if isinstance(child, ast.Name):
            names.add(child.id)
        elif isinstance(child, ast.Attribute) and isinstance(child.value, ast.Name):
            module, name = imported.get(child.value.id, (None, ""))
            if module is not None and name is None:
                heavy = heavy or _why(module, child.attr)
    return names, heavy


def _why(module: Path, name: str) -> str | None:
    """Why `name` of `module` is heavy, or None."""
    if module in _reading:  # modules that import each other: what is known so far
        return None
    reasons = heavy_names(module)
    return reasons.get(WHOLE) or reasons.get(name)


def _module_file(name: str) -> Path | None:
    base = TESTS.parent.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def why_left_out(item: pytest.Item) -> str | None:
    """What makes `item` no quick test, or None."""
    path = Path(str(item.path)).resolve()
    relative = path.relative_to(TESTS)
    if relative.parts[0] in LEFT_OUT_FOLDERS:
        return f"tests/{relative.parts[0]}: {LEFT_OUT_FOLDERS[relative.parts[0]]}"
    if why := slow_parameter(item):
        return why
    function = getattr(item, "function", None)
    if why := _why(path, function.__qualname__.split(".")[0] if function is not None else ""):
        return why
    info = getattr(item, "_fixtureinfo", None)
    for fixture in getattr(item, "fixturenames", ()):
        for definition in info.name2fixturedefs.get(fixture, ()) if info else ():
            source = Path(inspect.getsourcefile(definition.func) or "/").resolve()
            name = definition.func.__qualname__.split(".")[0]
            if source.is_relative_to(TESTS) and (why := _why(source, name)):
                return f"fixture {fixture}: {why}"
    return None


def pytest_configure(config: pytest.Config) -> None:
    global _running
    _running = True


def pytest_unconfigure(config: pytest.Config) -> None:
    global _running
    _running = False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    kept, left = [], []
    for item in items:
        (left if why_left_out(item) else kept).append(item)
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = kept


def pytest_report_header(config: pytest.Config) -> str:
    return (
        "quick: no browser, real application, Ray, network-namespace machines, fleet, crash, other tree or"
        " wheel; the parity corpora sampled (tests/support/quick.py)"
    )
