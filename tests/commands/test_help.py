"""`--help` of every command and subcommand, run from the installed wheel as a user runs it.

The commands are found in the installed parser itself (every sub-parser, however deep), so a
command added later is covered without a list to keep; the demo shop's own entry point
(`python -m webarena_live.demo.site`, the README's way to start the shop alone) is one more.
"""

from __future__ import annotations

import json

from tests.support.wheel import InstalledWheel

LIST_COMMANDS = """
import argparse, json
from webarena_live.commands.cli import build_parser

def walk(parser, path):
    yield path
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from walk(sub, [*path, name])

print(json.dumps(list(walk(build_parser(), []))))
"""


def _commands(wheel: InstalledWheel) -> list[list[str]]:
    listed = wheel.run(str(wheel.python), "-c", LIST_COMMANDS)
    assert listed.returncode == 0, listed.stderr
    commands: list[list[str]] = json.loads(listed.stdout)
    return commands


def test_the_installed_package_is_the_wheel(installed_wheel: InstalledWheel) -> None:
    where = installed_wheel.run(
        str(installed_wheel.python), "-c", "import webarena_live; print(webarena_live.__file__)"
    )
    assert where.returncode == 0, where.stderr
    assert where.stdout.strip().startswith(str(installed_wheel.python.parent.parent)), where.stdout


def test_every_command_and_subcommand_has_a_working_help(installed_wheel: InstalledWheel) -> None:
    commands = _commands(installed_wheel)
    assert [] in commands and ["serve"] in commands and ["report"] in commands and len(commands) >= 6
    script = str(installed_wheel.scripts / "webarena-live")
    for path in commands:
        done = installed_wheel.run(script, *path, "--help")
        said = f"webarena-live {' '.join(path)} --help: exit {done.returncode}\n{done.stderr[-2000:]}"
        assert done.returncode == 0 and not done.stderr, said
        assert done.stdout.startswith("usage: webarena-live"), said
        assert "options:" in done.stdout, said
        assert "%%" not in done.stdout, said  # a description is printed as written: one percent sign
    top = installed_wheel.run(script, "--help").stdout
    assert "95% intervals" in top  # a percent sign in a help text is shown once, not as a format error
    version = installed_wheel.run(script, "--version")
    assert version.returncode == 0 and version.stdout.startswith("webarena-live "), version


def test_the_demo_shops_entry_point_has_a_working_help(installed_wheel: InstalledWheel) -> None:
    done = installed_wheel.run(str(installed_wheel.python), "-m", "webarena_live.demo.site", "--help")
    assert done.returncode == 0 and not done.stderr and done.stdout.startswith("usage:"), done.stderr
