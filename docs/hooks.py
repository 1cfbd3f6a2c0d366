"""MkDocs hooks: the reference pages that are made from the code at build time, never copied by hand.

A page holds a marker where its generated part goes:

- `<!-- generated: cli -->`: `webarena-live --help` and every subcommand's `--help`, from the parser
  `webarena_live.commands.cli.build_parser` builds (the same text the command prints);
- `<!-- generated: control-api -->`: the control API's routes, their parameters, bodies and answers,
  from the OpenAPI document the app itself generates (`webarena_live.control.app.openapi_document`,
  what `GET /openapi.json` answers).

A marker with no generator, or a generator whose marker no page holds, fails the build, so a page
cannot silently lose its reference. The hooks run in the build's own process: the package must be
installed in the environment `mkdocs` runs from (the `docs` extra beside the package).
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable, Iterator
from typing import Any

from mkdocs.exceptions import PluginError

MARKER = re.compile(r"<!-- generated: ([\w-]+) -->")
HELP_COLUMNS = "100"  # a fixed width, so the page does not depend on the terminal that builds it


def cli_reference() -> str:
    """Every command's `--help`, the top-level first, each under a heading of its own."""
    from webarena_live.commands.cli import build_parser

    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = HELP_COLUMNS  # argparse reads the width from here
    try:
        sections = [_help_section(name, parser) for name, parser in _commands(build_parser())]
    finally:
        if previous is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = previous
    return "\n".join(sections)


def _commands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """The parser and its subcommands, depth first (`export`, then `export harbor`)."""
    yield parser.prog, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):  # aliases name one parser twice
                yield from _commands(sub)


def _help_section(name: str, parser: argparse.ArgumentParser) -> str:
    level = "###" if name.count(" ") > 1 else "##"  # `export harbor` under `export`
    return f"{level} `{name}`\n\n```text\n{parser.format_help().rstrip()}\n```\n"


def control_api_reference() -> str:
    """The routes as a table, then each route's parameters and answers, then the bodies' fields."""
    from webarena_live.control.app import openapi_document

    document = openapi_document()
    operations = [
        (method.upper(), path, operation)
        for path, methods in document["paths"].items()
        for method, operation in methods.items()
    ]
    lines = [
        f"Generated from the OpenAPI document of the control API, version {document['info']['version']}"
        " (what `GET /openapi.json` answers).",
        "",
        _cell(document["info"].get("description", "")),
        "",
        "| method | path | does |",
        "| --- | --- | --- |",
    ]
    lines += [f"| {method} | `{path}` | {_cell(op.get('summary', ''))} |" for method, path, op in operations]
    lines += ["", "## Routes", ""]
    for method, path, operation in operations:
        lines += _route(method, path, operation)
    lines += ["## Bodies", ""]
    for name, schema in document.get("components", {}).get("schemas", {}).items():
        lines += _schema(name, schema)
    return "\n".join(lines)


def _route(method: str, path: str, operation: dict[str, Any]) -> list[str]:
    lines = [f"### {method} `{path}`", "", _cell(operation.get("summary", "")), ""]
    if operation.get("description"):
        lines += [operation["description"].strip(), ""]
    parameters = operation.get("parameters", [])
    if parameters:
        lines += ["| parameter | in | type | meaning |", "| --- | --- | --- | --- |"]
        lines += [
            f"| `{p['name']}` | {p['in']} | {_type(p.get('schema', {}))} | "
            f"{_cell(p.get('description', ''))} |"
            for p in parameters
        ]
        lines.append("")
    body = operation.get("requestBody", {}).get("content", {})
    for content_type, media in body.items():
        lines += [f"Body ({content_type}): {_type(media.get('schema', {}))}", ""]
    answers = operation.get("responses", {})
    if answers:
        lines += ["| answer | when | body |", "| --- | --- | --- |"]
        lines += [
            f"| `{status}` | {_cell(answer.get('description', ''))} | "
            + ", ".join(_type(media.get("schema", {})) for media in answer.get("content", {}).values())
            + " |"
            for status, answer in sorted(answers.items())
        ]
        lines.append("")
    return lines


def _schema(name: str, schema: dict[str, Any]) -> list[str]:
    lines = [f"### {name}", ""]
    if schema.get("description"):
        lines += [_cell(schema["description"]), ""]
    properties = schema.get("properties", {})
    if properties:
        required = set(schema.get("required", []))
        lines += ["| field | type | required | meaning |", "| --- | --- | --- | --- |"]
        lines += [
            f"| `{field}` | {_type(spec)} | {'yes' if field in required else ''} | "
            f"{_cell(spec.get('description', spec.get('title', '')))} |"
            for field, spec in properties.items()
        ]
        lines.append("")
    elif "enum" in schema:
        lines += ["One of " + ", ".join(f"`{value}`" for value in schema["enum"]) + ".", ""]
    return lines


def _type(schema: dict[str, Any]) -> str:
    """A schema in a few words: a link to a named body, a type, a list of them."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{name.lower()})"
    for union in ("anyOf", "oneOf"):
        if union in schema:
            return " or ".join(_type(option) for option in schema[union])
    if schema.get("type") == "array":
        return f"list of {_type(schema.get('items', {}))}"
    if "enum" in schema:
        return " \\| ".join(f"`{value}`" for value in schema["enum"])
    return f"{schema['type']}" if "type" in schema else "any"


def _cell(text: str) -> str:
    """Text that stays inside one table cell."""
    words = " ".join(str(text).split())
    return words.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


GENERATORS: dict[str, Callable[[], str]] = {"cli": cli_reference, "control-api": control_api_reference}
_used: set[str] = set()


def on_pre_build(config: Any) -> None:
    _used.clear()


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    def generate(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in GENERATORS:
            raise PluginError(f"{page.file.src_path}: no generator for the marker {match.group(0)}")
        _used.add(name)
        return GENERATORS[name]()

    return MARKER.sub(generate, markdown)


def on_post_build(config: Any) -> None:
    unused = sorted(set(GENERATORS) - _used)
    if unused:
        raise PluginError(f"no page holds the marker of {', '.join(unused)}: its reference is missing")
