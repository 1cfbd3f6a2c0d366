"""The control API's requests and answers, as both clients of `client.py` send and read them.

Each request is data (`_Call`): its method, path, body and query, built in one place (`_Calls`) for the
blocking and the asyncio client alike; `_read` turns an answer into its JSON or the API's refusal
(`ControlAPIError`), `_notice` a stream message into a `Notice`. The public names are `client`'s.
"""

from __future__ import annotations

import json
import os
import warnings
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
from pydantic import BaseModel, ConfigDict

from webarena_live.evaluator import WebArenaLiveError

TOKEN_ENV = "WEBARENA_LIVE_CONTROL_TOKEN"
"""The control token's variable: the one `serve` reads its own from (addresses.credentials'
CONTROL_TOKEN_ENV, which the client may not import; tests/browsergym/test_control_api.py keeps them equal)."""
OLD_TOKEN_ENV = "WEBARENA_LIVE_TOKEN"
"""The name BrowserGym's environment read before: still read, with a warning, for one release."""


def token_from_env() -> str | None:
    """The control token from the environment: WEBARENA_LIVE_CONTROL_TOKEN, else the old
    WEBARENA_LIVE_TOKEN with a warning (renamed: one name for one setting), else None."""
    token = os.environ.get(TOKEN_ENV)
    if token:
        return token
    old = os.environ.get(OLD_TOKEN_ENV)
    if old:
        warnings.warn(
            f"{OLD_TOKEN_ENV} is renamed {TOKEN_ENV} (the variable serve reads): the old name is read "
            "for one more release",
            FutureWarning,
            stacklevel=2,
        )
        return old
    return None


class ControlAPIError(WebArenaLiveError):
    """The control API refused a request: its HTTP status, error code and detail."""

    def __init__(self, status: int, error: str, detail: Any) -> None:
        super().__init__(f"{status} {error}: {detail}")
        self.status = status
        self.error = error
        self.detail = detail

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuilt from the three fields, not from the message: an error raised in another process
        # (a Ray task, a pool worker) is pickled on its way back.
        return type(self), (self.status, self.error, self.detail), self.__dict__


class DifferentAnswer(ControlAPIError):
    """A finished session's finish sent another final answer than the one its verdict judged (409
    `different_answer`): `judged` is the answer the verdict is for, `refused` the one sent now (each as
    the document it holds). The same answer again gets the same result; a new answer needs a new
    attempt (`start(..., restart=True)`)."""

    def __init__(self, status: int, error: str, detail: Any) -> None:
        super().__init__(status, error, detail)
        said = detail if isinstance(detail, dict) else {}
        self.judged = said.get("judged")
        self.refused = said.get("refused")


class Started(BaseModel):
    """What `POST /sessions` answers: the session, its task and where the agent starts."""

    model_config = ConfigDict(frozen=True, extra="allow")

    session: str
    task_id: int
    intent: str
    start_urls: list[str]
    sites: list[str]
    state: str | None = None
    resumed_events: int | None = None
    proxy: str | None = None
    """The session's own proxy address, `http://HOST:PORT`: traffic through it is this session's, with
    no credentials (released when the session finishes)."""
    worker: int | None = None
    """The worker process that holds the session (`serve --workers`)."""
    replicas: dict[str, str] | None = None
    """The session's lease: each site's placeholder -> the URL of the replica it works on (its start URLs
    are rendered on them)."""


class Notice(BaseModel):
    """One message of an event stream: `event` (a captured event), `session`, `reset` or `finished`."""

    model_config = ConfigDict(frozen=True)

    kind: str
    data: dict[str, Any]
    id: str | None = None


@dataclass(frozen=True)
class _Call:
    """One request of the API: method, path, JSON body and query."""

    method: str
    path: str
    body: Any = None
    params: dict[str, Any] | None = None


def _session_path(name: str, action: str = "") -> str:
    return f"/sessions/{quote(name, safe='')}" + (f"/{action}" if action else "")


def _start_body(task_id: int, options: dict[str, Any]) -> dict[str, Any]:
    return {
        "task_id": task_id,
        **{key: value for key, value in options.items() if value not in (None, False)},
    }


def _read(response: httpx.Response) -> Any:
    """The JSON answer, or ControlAPIError for a refusal (the API's `{"error", "detail"}`)."""
    if response.is_success:
        return response.json() if response.content else None
    try:
        body = response.json()
        error, detail = body.get("error", "http_error"), body.get("detail")
    except (ValueError, AttributeError):
        error, detail = "http_error", response.text[:500]
    if error == "different_answer":
        raise DifferentAnswer(response.status_code, error, detail)
    if response.status_code == 401:
        raise ControlAPIError(401, error, f"{detail} (the client sends ${TOKEN_ENV}, or its token=)")
    raise ControlAPIError(response.status_code, error, detail)


def _start_timeout(options: dict[str, Any], default: Any) -> Any:
    """A start that may wait for a replica gets that long to answer, and the usual time beside."""
    wait = options.get("wait")
    if isinstance(wait, int | float) and wait > 0:
        return httpx.Timeout(default.read + float(wait) if default.read else None, connect=default.connect)
    return default


def _notice(kind: str, data: str, event_id: str | None) -> Notice | None:
    """A stream message as a Notice; None for one without data (the stream's `retry:` advice).

    Captured events are sent without an event name, which SSE reads as `message`.
    """
    if not data:
        return None
    return Notice(
        kind="event" if kind in ("", "message") else kind, data=json.loads(data), id=event_id or None
    )


def _headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


class _Calls:
    """The API's requests, shared by both clients."""

    health = _Call("GET", "/health")
    list_tasks = _Call("GET", "/tasks")
    list_sessions = _Call("GET", "/sessions")

    @staticmethod
    def start(task_id: int, **options: Any) -> _Call:
        return _Call("POST", "/sessions", _start_body(task_id, options))

    @staticmethod
    def session(
        name: str, action: str = "", body: Any = None, since: int = 0, status: list[int] | None = None
    ) -> _Call:
        method = "GET" if body is None else "POST"
        params: dict[str, Any] = {"since": since} if since else {}
        if status is not None:
            params["status"] = status
        return _Call(method, _session_path(name, action), body, params or None)
