"""`score` and `ascore`: finish a session (or read its verdict) and return its `Reward`.

    from webarena_live.rewards import score

    reward = score("agent-7", {"task_type": "NAVIGATE", "status": "SUCCESS", "retrieved_data": None},
                   control="http://127.0.0.1:8081")
    if not reward.masked:
        train_on(reward.value)

The steps, the same in both flavours: finish the session with the final response (an answer that is
not a JSON object is sent as text, and judged as the reference judges it: a failure); no response
given: read the verdict it has. A session already finished with the same answer gives its verdict
again; with a different answer the reward is masked `different_answer` (the verdict judged the
other one, and both are named in the reason), never the first verdict as the second's. A 503 (its
worker restarting) is retried until `patience` runs out. Whether the task's sites answered comes with
the finish's answer (`sites_answered`); from a server that does not send it, a verdict short of
success is checked against the session's trace for a site that never answered (a second call).
Every run-time failure comes back masked with its reason, never as a 0.0 (`reward.py` says which).

The HTTP clients are kept per control URL and token (and per event loop for `ascore`), so a trainer
that scores thousands of sessions reuses its connections.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
import weakref
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# httpx loads its transport (httpcore, and trio or anyio with it where they are installed) only when
# the first client is made: loaded here with the process's other imports, not inside its first reward.
import httpcore  # noqa: F401
import httpx

from webarena_live.client import DEFAULT_URL, AsyncClient, Client, ControlAPIError, DifferentAnswer
from webarena_live.evaluator import UNREACHABLE_STATUSES, site_origins
from webarena_live.rewards.reward import (
    Reward,
    judged,
    masked,
    needs_site_check,
    refusal,
    sent_site_check,
    unreachable_site,
)

CONTROL_ENV = "WEBARENA_LIVE_CONTROL"
"""The control API's URL when `control` is not given (else http://127.0.0.1:8081)."""
TOKEN_ENV = "WEBARENA_LIVE_CONTROL_TOKEN"
"""The control token when `token` is not given (the variable `serve` reads its own from)."""
PATIENCE = 60.0
"""Seconds a finish is retried while the session's worker restarts (503 with Retry-After)."""
READ_RESULT = None
"""`final_response=None`: the session is not finished here; its verdict is read."""

_clients: dict[tuple[str, str | None], Client] = {}
_clients_lock = threading.Lock()
_async_clients: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, dict[tuple[str, str | None], AsyncClient]
]
_async_clients = weakref.WeakKeyDictionary()
_origins: dict[str, frozenset[str]] = {}
SHOWN_ANSWER = 300
"""Characters of each answer a `different_answer` reason shows (the refusal's detail has them whole)."""
UNANSWERED = sorted(UNREACHABLE_STATUSES)
"""The trace is asked for these events only: the server filters, so a long session costs little."""


def control_url(control: str | None) -> str:
    return control or os.environ.get(CONTROL_ENV) or DEFAULT_URL


def control_token(token: str | None) -> str | None:
    return token if token is not None else os.environ.get(TOKEN_ENV) or None


def _needs_tls(url: str) -> bool:
    """Whether the client must load the CA certificates: only for https:// (loading them is most of a
    first reward's time in a fresh process; the client follows no redirect)."""
    return not url.startswith("http://")


def shared_client(control: str | None = None, token: str | None = None) -> Client:
    """The process's client for this control API (kept open: its connections are reused)."""
    key = (control_url(control), control_token(token))
    with _clients_lock:
        if key not in _clients:
            _clients[key] = Client(key[0], token=key[1], verify=_needs_tls(key[0]))
        return _clients[key]


def shared_async_client(control: str | None = None, token: str | None = None) -> AsyncClient:
    """The running event loop's client for this control API."""
    per_loop = _async_clients.setdefault(asyncio.get_running_loop(), {})
    key = (control_url(control), control_token(token))
    if key not in per_loop:
        per_loop[key] = AsyncClient(key[0], token=key[1], verify=_needs_tls(key[0]))
    return per_loop[key]


def score(
    session: str,
    final_response: Any = READ_RESULT,
    *,
    control: str | None = None,
    token: str | None = None,
    patience: float = PATIENCE,
    client: Client | None = None,
    mask_site_errors: bool = True,
) -> Reward:
    """The reward of `session`: finished with `final_response` (None: its verdict is read).
    `mask_site_errors=False` keeps the plain score of a session whose sites answered failures."""
    api = client or shared_client(control, token)
    steps = _scoring(session, final_response, patience, api.http.base_url, mask_site_errors)
    step = _advance(steps, None, None)
    while isinstance(step, _Ask):
        try:
            reply, error = step.call(api, time.sleep), None
        except (ControlAPIError, httpx.HTTPError) as failed:
            reply, error = None, failed
        step = _advance(steps, reply, error)
    return step


async def ascore(
    session: str,
    final_response: Any = READ_RESULT,
    *,
    control: str | None = None,
    token: str | None = None,
    patience: float = PATIENCE,
    client: AsyncClient | None = None,
    mask_site_errors: bool = True,
) -> Reward:
    """`score` for asyncio code: the same steps, each request awaited."""
    api = client or shared_async_client(control, token)
    steps = _scoring(session, final_response, patience, api.http.base_url, mask_site_errors)
    step = _advance(steps, None, None)
    while isinstance(step, _Ask):
        reply: Any = None
        error: ControlAPIError | httpx.HTTPError | None = None
        try:
            reply = await step.call(api, asyncio.sleep)
        except (ControlAPIError, httpx.HTTPError) as failed:
            error = failed
        step = _advance(steps, reply, error)
    return step


@dataclass(frozen=True)
class _Ask:
    """One step of a reward for the client to take: a method of the client's (`sleep`: a pause)."""

    method: str
    args: tuple[Any, ...] = ()
    options: dict[str, Any] = field(default_factory=dict)

    def call(self, api: Client | AsyncClient, sleep: Any) -> Any:
        """The step taken (an awaitable with the asyncio client)."""
        if self.method == "sleep":
            return sleep(*self.args)
        return getattr(api, self.method)(*self.args, **self.options)


Steps = Generator[_Ask, Any, Reward]
"""A reward's steps: each client request asked for gets its answer sent back in (its failure thrown in),
so both flavours of `score` take the same steps with their own client."""


def _advance(steps: Steps, reply: Any, error: BaseException | None) -> _Ask | Reward:
    """The next step, given the last one's answer or failure; the reward once there are none."""
    try:
        return steps.send(reply) if error is None else steps.throw(error)
    except StopIteration as done:
        reward: Reward = done.value
        return reward


def _scoring(session: str, answer: Any, patience: float, base_url: httpx.URL, mask: bool = True) -> Steps:
    """Judge `session` on `answer`; a 503 (its worker restarting) is asked again until `patience` runs
    out; any other refusal, or an API that does not answer, is the masked reward saying so."""
    deadline = time.monotonic() + patience
    while True:
        try:
            return (yield from _judging(session, answer, str(base_url), mask))
        except ControlAPIError as error:
            if (wait := _retry_in(error, deadline)) is None:
                return refusal(session, error.status, error.error, error.detail)
            yield _Ask("sleep", (wait,))
        except httpx.HTTPError as error:
            return _unreachable(session, base_url, error)


def _judging(session: str, answer: Any, base: str, mask_site_errors: bool = True) -> Steps:
    view = None
    if answer is READ_RESULT:
        view = yield _Ask("session", (session,))
    else:
        try:
            result = yield _Ask("finish_document", (session, answer))
        except ControlAPIError as error:
            if (refused := answered_another(session, error)) is None:
                raise
            return refused
    if view is not None:
        read = _finished(session, view)
        if isinstance(read, Reward):
            return read
        result = read
    said, site_down = sent_site_check(result)
    if not said and needs_site_check(result):  # a server that does not send it: read the trace
        if base not in _origins:
            _origins[base] = site_origins((yield _Ask("health")).get("sites"))
        unanswered = yield _Ask("trace", (session,), {"status": UNANSWERED})
        site_down = unreachable_site(unanswered, _origins[base])
    return judged(session, result, site_down, mask_site_errors=mask_site_errors)


def answered_another(session: str, error: ControlAPIError) -> Reward | None:
    """The finished session's verdict judged another answer than the one given (masked
    `different_answer`, both named), or a server before `different_answer` would not say which answer
    it judged (masked `already_finished`); None for any other refusal. Never the first verdict as the
    second answer's (docs/architecture.md, The finish)."""
    if isinstance(error, DifferentAnswer):
        return masked(
            session,
            "different_answer",
            f"session {session!r} was judged on another answer: {_shown(error.judged)}; "
            f"this one was refused: {_shown(error.refused)} (start it again to judge a new answer)",
        )
    if error.error == "already_finished":
        return masked(
            session,
            "already_finished",
            f"session {session!r} is finished and this server does not say which answer its verdict "
            f"judged: {error.detail}",
        )
    return None


def _shown(document: Any) -> str:
    text = json.dumps(document, sort_keys=True)
    return text if len(text) <= SHOWN_ANSWER else text[: SHOWN_ANSWER - 3] + "..."


def _finished(session: str, view: dict[str, Any]) -> dict[str, Any] | Reward:
    """The verdict of a finished session from its view: its `eval_result.json` when this machine can
    read it (every field, `interference` included), else the view's status and score."""
    state = view.get("state")
    if state == "lost":
        return masked(session, "session_lost", str(view.get("reason") or "its worker's node is gone"))
    if state != "finished" or not view.get("result"):
        return masked(session, "not_finished", f"session {session!r} is {state}: give its final response")
    outputs = view.get("outputs") or {}
    result: dict[str, Any] = dict(view["result"])
    try:
        if "eval_result.json" in outputs:
            result = json.loads(Path(outputs["eval_result.json"]).read_text())
    except (OSError, ValueError):
        pass  # the files are on another machine: the view's status and score are the verdict's
    for beside in ("interference", "sites_answered", "unanswered", "site_errors"):  # answered beside
        if beside in view:  # the verdict (not in eval_result.json)
            result[beside] = view[beside]
    return result


def _retry_in(error: ControlAPIError, deadline: float) -> float | None:
    """Seconds to wait before asking again, when the API says to (503, Retry-After) and time is left."""
    if error.status != 503:
        return None
    left = deadline - time.monotonic()
    return min(0.5, left) if left > 0 else None


def _unreachable(session: str, base_url: httpx.URL, error: httpx.HTTPError) -> Reward:
    kind = "control_timeout" if isinstance(error, httpx.TimeoutException) else "control_unreachable"
    return masked(session, kind, f"the control API at {base_url} did not answer: {error!r}")
