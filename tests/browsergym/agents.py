"""Scripted BrowserGym agents for the demo shop: BrowserGym's own actions (goto, fill, click,
send_msg_to_user, report_infeasible), the elements found by role and name in the observation's
accessibility tree, as a model reading BrowserGym's observation would find them."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from browsergym.core.action.highlevel import HighLevelActionSet
from browsergym.experiments.agent import Agent
from browsergym.experiments.loop import AbstractAgentArgs

# No tiktoken work-around here: the environment makes its process's experiment loop count words
# (webarena_live.browsergym.offline_token_counts), as it does for any user's loop.

Step = Callable[[dict[str, Any]], str]
ACTIONS = HighLevelActionSet(subsets=["bid", "nav", "chat", "infeas"], strict=False, multiaction=False)


def bid(obs: dict[str, Any], role: str, name: str) -> str:
    """The BrowserGym id of the first element with this role and accessible name."""
    for node in obs["axtree_object"]["nodes"]:
        named = node.get("role", {}).get("value") == role and node.get("name", {}).get("value") == name
        if named and "browsergym_id" in node:
            return str(node["browsergym_id"])
    raise LookupError(f"no {role} named {name!r} on {obs['url']}")


def click(role: str, name: str) -> Step:
    return lambda obs: f"click({bid(obs, role, name)!r})"


def fill(role: str, name: str, text: str) -> Step:
    return lambda obs: f"fill({bid(obs, role, name)!r}, {text!r})"


def goto(path: str) -> Step:
    # The start page's own origin: the leased replica's address, whichever copy it is.
    return lambda obs: f"goto({'/'.join(obs['url'].split('/', 3)[:3]) + path!r})"


def answer(task_type: str, data: list[Any] | None = None, *, fenced: bool = False) -> Step:
    text = json.dumps({"task_type": task_type, "status": "SUCCESS", "retrieved_data": data})
    message = f"```json\n{text}\n```" if fenced else text
    return lambda obs: f"send_msg_to_user({message!r})"


def infeasible(reason: str) -> Step:
    return lambda obs: f"report_infeasible({reason!r})"


SEARCH_MUGS = [fill("searchbox", "Search", "mug"), click("button", "Search")]
PLANS: dict[str, tuple[int, list[Step], str]] = {
    # name: (task, steps, the verdict planned)
    "navigate-right": (1003, [*SEARCH_MUGS, click("link", "Price: low to high"),
                              click("link", "Enamel Camp Mug"), answer("NAVIGATE")], "success"),
    "navigate-wrong": (1003, [*SEARCH_MUGS, answer("NAVIGATE")], "failure"),  # one step short
    "retrieve-right": (1001, [goto("/catalogsearch/result/?q=desk+lamp"), click("link", "Aurora Desk Lamp"),
                              answer("RETRIEVE", ["$34.99"], fenced=True)], "success"),
    "retrieve-wrong": (1001, [goto("/catalogsearch/result/?q=desk+lamp"), answer("RETRIEVE", ["$29.99"])],
                       "failure"),
    "retrieve-infeasible": (1001, [infeasible("the shop has no such lamp")], "failure"),
    "mutate-right": (1004, [click("link", "Trailblazer Hiking Backpack 40L"), click("button", "Add to Cart"),
                            answer("MUTATE")], "success"),
    "mutate-wrong": (1004, [click("link", "Trailblazer Hiking Backpack 40L"), answer("MUTATE")], "failure"),
    "wishlist-right": (1005, [click("link", "Aurora Desk Lamp"), click("button", "Add to Wish List"),
                              answer("MUTATE")], "success"),
}  # fmt: skip


class ScriptedAgent(Agent):
    """Plays its plan's steps in order, one action per observation."""

    def __init__(self, plan: str) -> None:
        self.steps = list(PLANS[plan][1])
        self.action_set = ACTIONS

    def obs_preprocessor(self, obs: dict[str, Any]) -> dict[str, Any]:
        return obs  # it reads the accessibility tree itself (BrowserGym's default flattens it to text)

    def get_action(self, obs: Any) -> tuple[str | None, dict[str, Any]]:
        if not self.steps:
            return None, {}
        return self.steps.pop(0)(obs), {}


@dataclass
class ScriptedAgentArgs(AbstractAgentArgs):
    agent_name: str = "scripted"
    plan: str = "navigate-right"

    def make_agent(self) -> Agent:
        return ScriptedAgent(self.plan)
