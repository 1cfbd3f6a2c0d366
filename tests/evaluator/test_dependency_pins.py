"""Verdicts independent of dependency drift: the parsers that decide verdicts are the reference's versions.

The reference's own requirements are read from the metadata of the installed webarena-verified
1.2.3 in the oracle's environment (run as a subprocess, never imported). For every distribution in
`webarena_live.evaluator.dependencies.VERDICT_DEPENDENCIES` the reference version is its exact pin,
or, for a range pin or a parser it does not name, the version installed in the oracle's
environment. Our installed version and the pin in pyproject.toml (what a wheel install gets) must
both be exactly that version.
"""

from __future__ import annotations

import json
import subprocess
import tomllib
from collections.abc import Callable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.support.paths import REPO
from webarena_live.evaluator.dependencies import NOT_VERDICT_AFFECTING, VERDICT_DEPENDENCIES

REFERENCE = "webarena-verified"

_ORACLE_SCRIPT = """
import json, sys
from importlib import metadata
installed = {}
for name in sys.argv[1:]:
    try:
        installed[name] = metadata.version(name)
    except metadata.PackageNotFoundError:
        installed[name] = None
print(json.dumps({"version": metadata.version("webarena-verified"),
                  "requires": metadata.requires("webarena-verified") or [], "installed": installed}))
"""


def reference_requirements(requires: list[str]) -> dict[str, Requirement]:
    """The reference's unconditional requirements (extras such as `examples` left out), by name."""
    found: dict[str, Requirement] = {}
    for line in requires:
        requirement = Requirement(line)
        if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
            found[canonicalize_name(requirement.name)] = requirement
    return found


def reference_versions(requires: list[str], oracle_installed: Mapping[str, str | None]) -> dict[str, str]:
    """The version each verdict-affecting distribution must have: the reference's exact pin, else
    (range pin, or a parser it does not name) the version its own environment resolved."""
    pins = reference_requirements(requires)
    versions: dict[str, str] = {}
    for name in VERDICT_DEPENDENCIES:
        requirement = pins.get(canonicalize_name(name))
        exact = [s.version for s in requirement.specifier if s.operator == "=="] if requirement else []
        installed = oracle_installed.get(name)
        if len(exact) == 1 and "*" not in exact[0]:
            versions[name] = exact[0]
        elif installed is not None:
            assert requirement is None or requirement.specifier.contains(installed, prereleases=True)
            versions[name] = installed
        else:
            raise AssertionError(f"{name}: neither pinned by the reference nor installed in its environment")
    return versions


def drift(expected: Mapping[str, str], version_of: Callable[[str], str | None]) -> list[str]:
    """One line per distribution whose version (by `version_of`) is not exactly the expected one."""
    return [
        f"{name}: {found} here, the reference has {want}"
        for name, want in expected.items()
        if (found := version_of(name)) != want
    ]


def installed_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def pyproject_pins(pyproject: Path) -> dict[str, str]:
    """`[project] dependencies` as name -> specifier text (e.g. "==1.7.0")."""
    dependencies = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    return {canonicalize_name(r.name): str(r.specifier) for r in map(Requirement, dependencies)}


@pytest.fixture(scope="module")
def reference(oracle_python: Path) -> dict[str, Any]:
    done = subprocess.run(
        [str(oracle_python), "-c", _ORACLE_SCRIPT, *VERDICT_DEPENDENCIES],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    found: dict[str, Any] = json.loads(done.stdout)
    assert found["version"] == "1.2.3", found["version"]
    return found


@pytest.fixture(scope="module")
def expected_versions(reference: dict[str, Any]) -> dict[str, str]:
    return reference_versions(reference["requires"], reference["installed"])


def test_every_requirement_of_the_reference_is_classified(reference: dict[str, Any]) -> None:
    """A requirement the reference adds (a new parser) must be pinned here or said not to matter."""
    known = {canonicalize_name(n) for n in [*VERDICT_DEPENDENCIES, *NOT_VERDICT_AFFECTING]}
    unknown = sorted(set(reference_requirements(reference["requires"])) - known)
    assert not unknown, (
        f"requirements of the reference in neither list of evaluator/dependencies.py: {unknown}"
    )


def test_installed_versions_are_the_references(expected_versions: dict[str, str]) -> None:
    problems = drift(expected_versions, installed_version)
    agreeing = len(expected_versions) - len(problems)
    print(
        f"\nverdict-affecting distributions at the reference's versions: {agreeing}/{len(expected_versions)}"
    )
    assert not problems, problems


def test_pyproject_pins_the_references_versions(expected_versions: dict[str, str]) -> None:
    pins = pyproject_pins(REPO / "pyproject.toml")
    problems = drift(
        {name: f"=={version}" for name, version in expected_versions.items()},
        lambda name: pins.get(canonicalize_name(name)),
    )
    assert not problems, problems


def test_a_drifted_version_is_caught(expected_versions: dict[str, str]) -> None:
    """The comparison itself: a newer jsonpath-ng (the issue's example) or a missing package fails."""
    changed = {**expected_versions, "jsonpath-ng": "1.16.0"}
    assert drift(expected_versions, changed.get) == ["jsonpath-ng: 1.16.0 here, the reference has 1.7.0"]
    assert drift({"us": "3.2.0"}, lambda name: None) == ["us: None here, the reference has 3.2.0"]
