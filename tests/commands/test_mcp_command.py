"""`webarena-live mcp` where the MCP SDK is missing (Python 3.11's install, whose `[mcp]` extra installs
nothing): one line saying what to install, exit status 2; its `--help` needs no SDK. The server itself
is tested with the SDK's own client in tests/mcp."""

from __future__ import annotations

import subprocess
import sys

from webarena_live.commands.mcp import MISSING_SDK

WITHOUT_SDK = (
    "import sys; sys.modules['mcp'] = None; from webarena_live.commands.cli import main; "
    "sys.exit(main(sys.argv[1:]))"
)


def test_a_missing_sdk_is_said_with_what_to_install() -> None:
    done = subprocess.run([sys.executable, "-c", WITHOUT_SDK, "mcp", "--task", "1003"],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == MISSING_SDK
    assert "pip install 'webarena-live[mcp]'" in MISSING_SDK


def test_its_help_needs_no_sdk() -> None:
    done = subprocess.run([sys.executable, "-c", WITHOUT_SDK, "mcp", "--help"],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    for flag in ("--task", "--session", "--control", "--transport", "--restart", "--run", "--port"):
        assert flag in done.stdout, flag
