"""The fenced blocks of the docs that tests read: the one right after each `<!-- MARKER ... -->`."""

from __future__ import annotations

import re


def fenced_after(marker: str, text: str) -> list[str]:
    """The fenced blocks right after each `<!-- MARKER ... -->` in `text`.

    The marker ends at a space, so `example: mcp-config` is not also
    `example: mcp-config-playwright`.
    """
    return re.findall(rf"<!-- {re.escape(marker)}(?=\s)[^>]*-->\n```\w*\n(.*?)```", text, re.S)
