"""Token counts that need no download, for BrowserGym's experiment loop.

BrowserGym's loop (browsergym-experiments) counts each observation's tokens with tiktoken, which
downloads its encoding from the web on first use: on a machine that reaches none, every episode dies
in its first step with a ConnectionError and a cum_reward of 0. The counts are step statistics only
(`n_token_*` in the step's stats; no reward or verdict reads them), so without a local encoding
they are word counts. A tiktoken cache (`TIKTOKEN_CACHE_DIR` naming a folder that holds the
encoding) keeps tiktoken's own counts.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any

CACHE_ENV = "TIKTOKEN_CACHE_DIR"
LOOPS = ("browsergym.experiments.loop", "browsergym.experiments.utils", "agentlab.experiments.loop")
"""Where a loop's `count_tokens` is looked up: BrowserGym's loop imported it from its utils, whose
`count_messages_token` calls its own; AgentLab's copy of the loop, when it is the one running."""


def word_count(text: Any, model: str = "gpt-4") -> int:
    """The loop's `count_tokens` without an encoding: whitespace-separated words."""
    return len(str(text).split())


def offline_token_counts() -> bool:
    """Make this process's experiment loops count words unless tiktoken has a local cache; returns
    whether they now do. Only loops already imported are changed (one imports AgentLab only when
    AgentLab runs it), BrowserGym's imported here when it is installed."""
    if os.environ.get(CACHE_ENV):
        return False
    with contextlib.suppress(ImportError):
        import browsergym.experiments.loop  # noqa: F401
    changed = False
    for name in LOOPS:
        module = sys.modules.get(name)
        if module is not None and hasattr(module, "count_tokens"):
            module.count_tokens = word_count  # type: ignore[attr-defined]
            changed = True
    return changed
