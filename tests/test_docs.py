"""The documentation: a short README that points into the site, reference pages made from the code, the
README's example the one the guide runs, and the quick test selection the README promises.

`mkdocs build --strict` (scripts/bootstrap.sh test) checks every link and page of the site; these tests
check what a build cannot: what the pages must say.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

from tests.support.doc_blocks import fenced_after
from tests.support.quick import WHOLE, heavy_names
from tests.support.quick_collection import quick_collection

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
DOCS = REPO / "docs"


def _hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_hooks", DOCS / "hooks.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_is_short_and_says_both_test_commands():
    text = README.read_text()
    assert len(text.splitlines()) < 250
    assert "scripts/bootstrap.sh test " in text and "scripts/bootstrap.sh test --quick" in text


def test_every_page_the_readme_links_is_in_the_site():
    links = re.findall(r"\]\((docs/[^)#]+)", README.read_text())
    assert len(links) > 20
    nav = (REPO / "mkdocs.yml").read_text()
    missing = [link for link in links if not (REPO / link).is_file() or link.removeprefix("docs/") not in nav]
    assert missing == []


def test_the_readme_example_is_the_one_the_guide_runs():
    """The README's short example is the guide's blocks that tests/e2e/test_readme_examples.py runs,
    not copies that could drift from them."""
    names = re.findall(r"<!-- same-as: ([\w-]+) -->", README.read_text())
    assert names == ["serve-demo-shop", "curl-session"], names
    for name in names:
        (shown,) = fenced_after(f"same-as: {name}", README.read_text())
        run = [
            block
            for page in DOCS.rglob("*.md")
            for block in fenced_after(f"example: {name}", page.read_text())
        ]
        assert run == [shown], f"the README's {name} is not the guide's"


def test_the_site_map_page_names_every_key_the_checks_accept():
    from webarena_live.evaluator.site_checks import CONFIG_KEYS, ENVIRONMENT_KEYS, HEALTH_KEYS, REPLICA_KEYS
    from webarena_live.evaluator.site_rules import RULE_KEYS
    from webarena_live.sites.spec import ContainerSite, VolumeSpec

    page = (DOCS / "reference" / "site-map.md").read_text()
    documented = set(re.findall(r"^\| `(\w+)` \|", page, re.M))
    keys = {*CONFIG_KEYS, *ENVIRONMENT_KEYS, *REPLICA_KEYS, *HEALTH_KEYS, *RULE_KEYS}
    keys |= {*ContainerSite.model_fields, *VolumeSpec.model_fields}  # a container entry's (sites/spec.py)
    assert sorted(keys - documented) == []
    assert sorted(documented - keys) == []  # nothing the checks would refuse


def test_the_cli_reference_is_every_commands_help():
    from webarena_live.commands.cli import build_parser

    page = _hooks().cli_reference()
    for command in (
        "webarena-live",
        "webarena-live serve",
        "webarena-live export harbor",
        "webarena-live report",
    ):
        assert f"`{command}`" in page, command
    serve = next(
        parser
        for action in build_parser()._actions
        if hasattr(action, "choices") and isinstance(action.choices, dict)
        for name, parser in action.choices.items()
        if name == "serve"
    )
    for option in serve._option_string_actions:
        assert option in page, option


def test_the_control_api_reference_is_the_openapi_document():
    from webarena_live.control.app import openapi_document

    page = _hooks().control_api_reference()
    document = openapi_document()
    for path, methods in document["paths"].items():
        for method in methods:
            assert f"### {method.upper()} `{path}`" in page, (method, path)
    for name in document["components"]["schemas"]:
        assert f"### {name}\n" in page, name


def test_a_marker_without_a_generator_or_a_generator_without_its_page_fails_the_build():
    from mkdocs.exceptions import PluginError

    hooks = _hooks()

    class Page:
        class file:  # the shape of mkdocs' Page.file
            src_path = "reference/x.md"

    hooks.on_pre_build(None)
    with pytest.raises(PluginError, match="no generator"):
        hooks.on_page_markdown("<!-- generated: nothing -->", Page, None, None)
    assert "## `webarena-live serve`" in hooks.on_page_markdown("<!-- generated: cli -->", Page, None, None)
    with pytest.raises(PluginError, match="control-api"):
        hooks.on_post_build(None)


def test_the_quick_selection_reads_what_starts_a_browser_an_application_ray_or_machines():
    tests = REPO / "tests"
    assert "browser" in heavy_names(tests / "control" / "test_dashboard.py")  # a fixture launching Chromium
    assert "CHROMIUM" in heavy_names(tests / "site" / "harness.py")  # whoever uses the path launches it
    assert WHOLE in heavy_names(tests / "gitlab" / "app.py")  # a real-shaped application
    assert WHOLE in heavy_names(tests / "support" / "netns.py")  # machines of network namespaces
    assert "engine" in heavy_names(tests / "containers" / "conftest.py")  # a podman service
    assert "test_sixteen_sessions_through_four_faults" in heavy_names(
        tests / "fleet" / "test_ray_machines.py"
    )
    assert WHOLE in heavy_names(tests / "e2e" / "test_readme_examples.py")
    assert heavy_names(tests / "evaluator" / "test_values_types.py") == {}


def test_the_quick_selection_leaves_those_tests_out_and_keeps_the_others():
    collection = quick_collection(
        "tests/control/test_dashboard.py", "tests/control/test_guard.py", "tests/fleet/test_ray_machines.py"
    )
    collected = collection.ids
    assert collected and all(line.startswith("tests/control/test_guard.py::") for line in collected), (
        collected
    )
    assert re.search(r"\d+/\d+ tests collected \(\d+ deselected\)", collection.output), collection.output
