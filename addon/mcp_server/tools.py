"""What the MCP server's tools do, over the control API's asyncio client (no MCP here: `server.py`
declares the tools and turns a `ToolRefusal` into the tool error the agent reads).

One server, one session: the one `--task` started (its start's answer is the task's view: the start URLs
on the session's leased copies, its own proxy address), or the one `--session` names, started by
someone else (its view is `GET /sessions/{s}`, its start URLs the task's as `GET /tasks/{id}` renders
them). A refusal of the control API reaches the agent as the API words it (`409 no_events: ...`), with
what to do next where the agent can do something.
"""

from __future__ import annotations

from typing import Any, Literal

import httpx

from webarena_live.client import AsyncClient, ControlAPIError, Started
from webarena_live.evaluator import WebArenaLiveError

Action = Literal["retrieve", "navigate", "mutate"]
"""The seed's `action` values (the response schema of WebArena-Verified's agent response)."""
AnswerStatus = Literal[
    "SUCCESS",
    "NOT_FOUND_ERROR",
    "ACTION_NOT_ALLOWED_ERROR",
    "PERMISSION_DENIED_ERROR",
    "DATA_VALIDATION_ERROR",
    "UNKNOWN_ERROR",
]
"""The seed's `status` values."""

_NEXT_STEP = {
    "no_events": "nothing was submitted: browse the task's pages through the proxy address get_task "
    "gives, then submit again",
    "different_answer": "the session is judged already, on the answer it was first sent",
    "unknown_session": "the session this server was started for does not exist (any more)",
}


class ToolRefusal(WebArenaLiveError):
    """A tool call the control API (or this server) refused: the message the agent reads."""


class SessionTools:
    """The tools of one session: its task, a preview of its verdict, its progress, its final answer."""

    def __init__(
        self,
        client: AsyncClient,
        *,
        session: str | None = None,
        task_id: int | None = None,
        start: dict[str, Any] | None = None,
    ) -> None:
        """`task_id`: start the session on it (`begin`), with `start`'s options (`restart`, `run`);
        without it the session `session` (`default` when None, as the API names it) is attached to."""
        self.client = client
        self.session = session
        self.task_id = task_id
        self.start_options = dict(start or {})
        self.started: Started | None = None

    async def begin(self) -> Started | None:
        """Start the session when this server was told its task; refused starts raise `ToolRefusal`."""
        if self.task_id is None:
            return None
        self.started = await self._call(
            self.client.start(self.task_id, session=self.session, **self.start_options)
        )
        self.session = self.started.session
        return self.started

    @property
    def name(self) -> str:
        """The session's name: the start's answer's, or the one given, else the API's own `default`."""
        return self.session or "default"

    async def task(self) -> dict[str, Any]:
        """The agent's task: session, task id, intent, start URLs, sites, proxy address, leased copies."""
        if self.started is not None:
            fields = ("session", "task_id", "intent", "start_urls", "sites", "proxy", "replicas")
            view = self.started.model_dump()
            return {field: view.get(field) for field in fields}
        session = await self._call(self.client.session(self.name))
        if session.get("task_id") is None:
            raise ToolRefusal(
                f"session {self.name!r} has no task: start one (POST /sessions), or run "
                "`webarena-live mcp --task ID` to have this server start it"
            )
        task = await self._call(self.client.task(int(session["task_id"])))
        return {
            "session": self.name,
            "task_id": task["task_id"],
            "intent": task["intent"],
            "start_urls": task["start_urls"],
            "sites": task["sites"],
            "proxy": session.get("proxy"),
            "replicas": session.get("replicas"),
        }

    async def progress(self) -> dict[str, Any]:
        """What each network evaluator of the task would say now (`GET /sessions/{s}/progress`)."""
        found = await self._call(self.client.progress(self.name))
        return found.model_dump(mode="json", exclude_none=True)

    async def preview(self, answer: dict[str, Any]) -> dict[str, Any]:
        """The verdict a finish with `answer` would give now, nothing finished (`/preview`)."""
        result = await self._call(self.client.preview(self.name, answer))
        return result.model_dump(mode="json", exclude_none=True)

    async def submit(self, answer: dict[str, Any]) -> dict[str, Any]:
        """Finish the session with the agent's final answer: the finish's answer, every field kept."""
        document: dict[str, Any] = await self._call(self.client.finish_document(self.name, answer))
        return document

    async def _call(self, request: Any) -> Any:
        try:
            return await request
        except ControlAPIError as error:
            raise ToolRefusal(_told(error)) from None
        except httpx.HTTPError as error:  # serve gone or not yet up: said, never a crash of the tool
            raise ToolRefusal(
                f"the control API at {self.client.http.base_url} did not answer: {error!r}"
            ) from None


def answer_document(
    action: str, status: str, results: list[Any] | None, error_details: str | None
) -> dict[str, Any]:
    """The final answer in the seed's field names (`error_details` only when given)."""
    document: dict[str, Any] = {"action": action, "status": status, "results": results}
    if error_details is not None:
        document["error_details"] = error_details
    return document


def _told(error: ControlAPIError) -> str:
    """The API's refusal as it words it, and what the agent can do about it."""
    step = _NEXT_STEP.get(error.error)
    return f"{error} ({step})" if step else str(error)
