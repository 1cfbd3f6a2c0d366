"""browser-use's own `Agent` loop on a session, with a chat model scripted the way browser-use's tests
mock one (`ainvoke` answering each step with the structured output asked for), and every setting the
guide's recipe gives: the session's own address with `<-loopback>` bypassed through it, no default
extensions, no sandbox, Debian's Chromium."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any

from browser_use import Agent, BrowserProfile
from browser_use.browser.profile import ProxySettings
from browser_use.llm.views import ChatInvokeCompletion

from webarena_live.client import AsyncClient, Started

CHROMIUM = "/usr/bin/chromium"
LAUNCHES = 3
"""Starts of browser-use's browser an episode may take before its first step (see `run_agent`)."""

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Script:
    """An episode: the task, its steps (browser-use actions; `{"click_text": TEXT}` clicks the link or
    button showing TEXT, its index read from the page as a model reads it) and the final answer."""

    task_id: int
    steps: tuple[dict[str, Any], ...]
    answer: dict[str, Any]


class ScriptedModel:
    """A chat model for browser-use's `Agent`: each call answers the script's next step."""

    model = provider = name = model_name = "scripted"

    def __init__(self, steps: list[dict[str, Any]]) -> None:
        done = {"done": {"text": "finished", "success": True}}
        self.steps = iter([*steps, done])
        self.pages: list[str] = []

    async def ainvoke(self, messages: list[Any], output_format: Any = None, **kwargs: Any) -> Any:
        step = next(self.steps)
        parts = messages[-1].content
        page = parts if isinstance(parts, str) else "".join(getattr(part, "text", "") for part in parts)
        self.pages.append(page)
        if "click_text" in step:
            found = re.search(rf"\[(\d+)\]<(?:a|button)\b.*\n\s*{re.escape(step['click_text'])}", page)
            assert found, f"no element showing {step['click_text']!r} on the page:\n{page[-3000:]}"
            step = {"click": {"index": int(found.group(1))}}
        reply = {"evaluation_previous_goal": "", "memory": "", "next_goal": "", "action": [step]}
        return ChatInvokeCompletion(completion=output_format.model_validate(reply), usage=None)


def profile(started: Started, *, bypass: str | None = "<-loopback>") -> BrowserProfile:
    return BrowserProfile(
        executable_path=CHROMIUM,
        headless=True,
        proxy=ProxySettings(server=started.proxy, bypass=bypass),
        enable_default_extensions=False,
        chromium_sandbox=False,
    )


async def run_agent(
    control: AsyncClient, session: str, script: Script, *, run: str, bypass: str | None = "<-loopback>"
) -> Started:
    """Start `session` on the script's task (outputs in `run`) and let browser-use's loop play it
    through the session's own address, from its first start URL."""
    started = await control.start(script.task_id, session=session, run=run)
    steps = [{"navigate": {"url": started.start_urls[0]}}, *script.steps]
    for attempt in range(LAUNCHES):
        model = ScriptedModel(steps)
        agent = Agent(task=started.intent, llm=model, browser_profile=profile(started, bypass=bypass),
                      use_vision=False, use_judge=False)  # fmt: skip
        try:
            history = await agent.run(max_steps=len(steps) + 2)
            break
        except Exception as error:
            # browser-use lost the Chromium it launched before the agent's first step (its CDP
            # endpoint gone on a loaded machine): nothing was browsed, the same session is tried again
            if model.pages or attempt == LAUNCHES - 1:
                raise
            logger.warning("browser-use's Chromium did not start (%r): launched again", error)
            await agent.close()
    assert history.is_done(), history.errors()
    return started
