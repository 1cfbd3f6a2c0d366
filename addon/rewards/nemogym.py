"""NeMo-Gym: `POST /verify` answering the session's `reward`, with `mask_sample` and the failure's
kind and reason when the sample must not count.

NeMo-Gym posts the rollout to a resources server's `/verify`: its `responses_create_params`, the
policy's `response` (an OpenAI Responses-API object) and the dataset row's own fields; the answer
echoes the request with `reward` added (and, from nemo-gym 0.7, `mask_sample`, `failure_kind`,
`failure_reason`). The row names the session in `webarena_session`; the agent's final response is
`webarena_answer` when the row or agent set it, else the text of the response's last assistant
message.

Two ways to serve it, both over `verify_body`:
- inside NeMo-Gym: a resources server (`SimpleResourcesServer`) whose `verify` returns
  `await verify_body(body.model_dump())` (docs/guides/rewards.md, NeMo-Gym);
- standalone, with no NeMo-Gym installed: `create_app()`, the same routes on FastAPI
  (`uvicorn --factory webarena_live.rewards.nemogym:create_app`).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from webarena_live.rewards.reward import Reward
from webarena_live.rewards.scoring import ascore

SESSION_FIELD = "webarena_session"
ANSWER_FIELD = "webarena_answer"
SHARED_KINDS = {
    "session_lost": "session_lost",
    "control_unreachable": "transport_unreachable",
    "control_timeout": "transport_timeout",
    "verdict_error": "verifier_error",
}
"""Our kinds that NeMo-Gym's shared failure vocabulary names; the others are `webarena_live:<kind>`."""


def response_text(response: dict[str, Any]) -> str:
    """The text of the last assistant message of an OpenAI Responses-API response."""
    texts = []
    for item in response.get("output") or []:
        if (
            isinstance(item, dict)
            and item.get("type") == "message"
            and item.get("role", "assistant") == "assistant"
        ):
            texts = [
                part.get("text", "")
                for part in item.get("content") or []
                if isinstance(part, dict) and part.get("type") == "output_text"
            ]
    return "".join(texts)


def failure_kind(reward: Reward) -> str | None:
    if reward.kind is None:
        return None
    return SHARED_KINDS.get(reward.kind, f"webarena_live:{reward.kind}")


def verify_fields(reward: Reward) -> dict[str, Any]:
    """What a verify response adds to the request: the reward and, for a masked one, why."""
    return {
        "reward": reward.value if reward.value is not None else 0.0,
        "mask_sample": reward.masked,
        "failure_kind": failure_kind(reward),
        "failure_reason": reward.reason,
        "webarena_status": reward.status,
    }


async def verify_body(
    body: dict[str, Any], *, control: str | None = None, token: str | None = None
) -> dict[str, Any]:
    """NeMo-Gym's verify answer for a request body: the request echoed, the reward fields added. A
    masked sample comes with `mask_sample: true`, the field NeMo-Gym excludes it by (its `reward` is
    the verdict's score when there is one, else 0.0: the field is required)."""
    session = body.get(SESSION_FIELD)
    if not session:
        raise ValueError(f"the verify request has no {SESSION_FIELD!r}: each row must name its session")
    answer = (
        body[ANSWER_FIELD]
        if body.get(ANSWER_FIELD) is not None
        else response_text(body.get("response") or {})
    )
    reward = await ascore(str(session), answer, control=control, token=token)
    return {**body, **verify_fields(reward)}


def create_app(control: str | None = None, token: str | None = None) -> FastAPI:
    """The resources server's routes on FastAPI, for NeMo-Gym to call without NeMo-Gym installed here."""
    app = FastAPI(title="webarena-live NeMo-Gym resources server")

    @app.get("/")
    async def alive() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/seed_session")
    async def seed_session() -> dict[str, Any]:
        return {}  # the session is started by whoever runs the agent (POST /sessions)

    @app.post("/close_session")
    async def close_session() -> dict[str, Any]:
        return {}

    @app.post("/verify")
    async def verify(request: Request) -> JSONResponse:
        body = await request.json()
        if not isinstance(body, dict) or not body.get(SESSION_FIELD):
            detail = f"the body must be a JSON object naming {SESSION_FIELD!r}"
            return JSONResponse({"error": "bad_request", "detail": detail}, status_code=422)
        return JSONResponse(await verify_body(body, control=control, token=token))

    return app
