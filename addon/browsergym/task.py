"""The BrowserGym task of a session: it opens the start URLs, states the goal, and turns the agent's
message to the user into the session's finish (the official score, once)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import playwright.sync_api
from browsergym.core.task import AbstractBrowserTask

INFEASIBLE_STATUS = "NOT_FOUND_ERROR"
INFEASIBLE_TASK_TYPE = "RETRIEVE"
"""What a `report_infeasible(reason)` answers: `{"task_type": "RETRIEVE", "status": "NOT_FOUND_ERROR",
"retrieved_data": null, "error_details": reason}`, the commonest kind among the official tasks that
cannot be done as asked (25 of their 40). The proxy tells no agent a task's expected type, so the type
is fixed too; make_env(infeasible_status=..., infeasible_task_type=...) picks others. An agent that
knows better sends its own answer with send_msg_to_user."""

_RESPONSE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "task_type": {"enum": ["RETRIEVE", "MUTATE", "NAVIGATE"]},
        "status": {
            "enum": [
                "SUCCESS",
                "ACTION_NOT_ALLOWED_ERROR",
                "PERMISSION_DENIED_ERROR",
                "NOT_FOUND_ERROR",
                "DATA_VALIDATION_ERROR",
                "UNKNOWN_ERROR",
            ],
        },
        "retrieved_data": {"type": ["array", "null"]},
        "error_details": {"type": ["string", "null"]},
    },
    "required": ["task_type", "status"],
}


def response_schema() -> dict[str, Any]:
    """The schema BrowserGym's webarena-verified task shows its agents: the reference's own model of
    the final response when it is installed (browsergym-webarena-verified brings it), else ours."""
    try:
        from webarena_verified.types import FinalAgentResponse
    except ImportError:
        return _RESPONSE_SCHEMA
    return dict(FinalAgentResponse.model_json_schema())


def goal_text(intent: str) -> str:
    """The intent and the answer format, worded as browsergym-webarena-verified 0.14.3 words them,
    so an agent's prompts carry over unchanged."""
    schema = json.dumps(response_schema(), indent=4)
    return (
        f"{intent}\n\n---\nFinal response format: When you send your final answer to the user with "
        "`send_msg_to_user`, your message must be a json formatted string that matches the following "
        f"schema:\n```\n{schema}\n```\nYour message in `send_msg_to_user` will be validated against "
        "this schema.\n"
    )


class LiveTask(AbstractBrowserTask):
    """One episode's task. `finish(response)` is the environment's: it finishes the session and
    returns the finish document, whose score `validate` gives as the reward of that step only."""

    def __init__(
        self,
        seed: int | None,
        *,
        intent: str,
        start_urls: list[str],
        finish: Callable[[Any], dict[str, Any]],
        infeasible_status: str = INFEASIBLE_STATUS,
        infeasible_task_type: str = INFEASIBLE_TASK_TYPE,
    ) -> None:
        super().__init__(seed)
        # BrowserGym's WebArena tasks' browser settings, so an episode behaves as theirs do (an env's
        # own slow_mo=, timeout=, viewport= still override them).
        self.viewport = {"width": 1280, "height": 720}
        self.slow_mo = 1000
        self.timeout = 10000
        self.intent, self.start_urls = intent, start_urls
        self._finish = finish
        self.infeasible_status, self.infeasible_task_type = infeasible_status, infeasible_task_type
        self.first_agent_message: int | None = None
        """Index in the chat of the first message after the goal (set by the environment after reset)."""
        self.result: dict[str, Any] | None = None
        self._rewarded = False

    @classmethod
    def get_task_id(cls) -> str:
        return "webarena_live"

    def setup(self, page: playwright.sync_api.Page) -> tuple[str, dict[str, Any]]:
        # A tab per start URL, as BrowserGym's WebArena tasks open them; the first is the active page.
        for index, url in enumerate(self.start_urls):
            if index:
                page = page.context.new_page()
            page.goto(url)
        return goal_text(self.intent), {}

    def final_response(self, role: str, text: str) -> Any:
        """What the proxy judges: the agent's message as sent (JSON, fenced or not: the evaluator reads
        it as it reads any final response); for `report_infeasible`, an answer with its status."""
        if role == "assistant":
            return text
        return {
            "task_type": self.infeasible_task_type,
            "status": self.infeasible_status,
            "retrieved_data": None,
            "error_details": text,
        }

    def validate(
        self, page: playwright.sync_api.Page, chat_messages: list[dict[str, Any]]
    ) -> tuple[float, bool, str, dict[str, Any]]:
        if self.result is None and self.first_agent_message is not None:
            for message in chat_messages[self.first_agent_message :]:
                if message["role"] in ("assistant", "infeasible"):
                    self.result = self._finish(self.final_response(message["role"], message["message"]))
                    break
        if self.result is None:
            return 0.0, False, "", {}
        reward = 0.0 if self._rewarded else float(self.result.get("score") or 0.0)
        self._rewarded = True
        return reward, True, "", {}
