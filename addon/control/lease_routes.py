"""The pool's routes: `GET /mutations` (what a front gathers from its workers), and of a session
(`session_routes` includes `of_session`): `POST /sessions/{s}/abandon` (give the replicas back now) and
`PUT /sessions/{s}/lease_ended` (a fleet's front telling a worker the lease it gave ended; what the two
say to each other is typed in `control/wire.py`)."""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from pydantic import ValidationError
from starlette.responses import Response

from webarena_live.control import models
from webarena_live.control.authority import abandon
from webarena_live.control.bodies import ABANDON_BODY_DOC, abandon_body, parse_json_body
from webarena_live.control.context import Control
from webarena_live.control.dependencies import GUARD, NamedSession
from webarena_live.control.errors import BadRequest, Conflict, JsonResponse
from webarena_live.control.models import Abandon
from webarena_live.control.responses import documented, guarded
from webarena_live.control.wire import LeaseEnd
from webarena_live.replicas import EndReason
from webarena_live.runs.settings import SessionState

router = APIRouter(tags=["pool"], dependencies=[GUARD], responses=guarded())

of_session = APIRouter(prefix="/{session}")
"""A session's lease, under the sessions' router (and its guard)."""


@of_session.post(
    "/abandon",
    summary="give the session's replicas back now: its lease ends (abandoned), its finish says so",
    responses=documented(models.Abandoned, 400, 409),
    openapi_extra=ABANDON_BODY_DOC,
)
async def post_abandon(
    # the body before the session: a bad body is a 400 whatever the session
    body: Annotated[Abandon | None, Depends(abandon_body)],
    found: NamedSession,
    ctx: Control,
) -> Response:
    if found.task is None:
        raise Conflict("no_task", f"session {found.name!r} has no task; nothing to abandon")
    if found.attempt.state is SessionState.FINISHED:
        raise Conflict("already_finished", f"session {found.name!r} is finished; its lease ended")
    lease = abandon(ctx, found, body.reason if body is not None else None)
    return JsonResponse({"session": found.name, "lease_ended": lease.ended_early,
                         "reason": lease.ended_detail, "replicas": dict(lease.replicas)})  # fmt: skip


@of_session.put("/lease_ended", include_in_schema=False)
async def put_lease_ended(found: NamedSession, request: Request, ctx: Control) -> Response:
    try:
        end = LeaseEnd.model_validate(parse_json_body(await request.body()))
    except ValidationError:
        raise BadRequest(
            "bad_lease_end", f"an object whose `ended` is one of {', '.join(EndReason)}"
        ) from None
    lease = found.attempt.lease
    if found.attempt.state is not SessionState.FINISHED and (lease is None or lease.ended is None):
        abandon(ctx, found, end.reason, end.ended)
    return JsonResponse({"session": found.name})


@router.get(
    "/mutations",
    summary="the mutations this proxy saw on the site map's replicas, after a sequence number",
    responses=documented(models.Mutations, 400),
)
async def get_mutations(
    ctx: Control,
    after: Annotated[int, Query(ge=0, description="the last sequence number seen")] = 0,
    active_after: Annotated[
        float | None, Query(description="the `now` of the last answer: `active` lists the uses since")
    ] = None,
    answers_after: Annotated[int, Query(ge=0, description="the last judged answer's number seen")] = 0,
) -> Response:
    log = ctx.mutations
    mutations = log.mutations_after(after) if log is not None else []
    now = time.time()  # before reading: a use at this very moment is told again next time, not lost
    # when each leased session last used its lease, so a front's --lease-timeout counts idle time;
    # read from the uses since the front's last ask, never by walking every session
    active = ctx.lease_use.since(active_after)
    reads = log.reads_view() if log is not None else {}  # what a front's /health sums
    answers = log.answers_after(answers_after) if log is not None else []  # the copies' health
    return JsonResponse(
        {"mutations": mutations, "epoch": log.epoch if log is not None else None, "active": active,
         "now": now, "reads": reads, "answers": answers}
    )  # fmt: skip
