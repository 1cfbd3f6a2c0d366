"""The control API of `serve --workers N`: one port in front of every worker's.

Each request goes to the worker that owns its session (`front/front.py`, through `front/link.py`); the
routes that speak of every session (`GET /health`, `GET /sessions`, `GET /events`: `front/events.py`)
ask every worker and answer once; a session's start, finish and abandon are `front/life.py`'s.
`POST /sessions` places a new session (`addresses/placement.py`) and tells the worker the port of its
address. While a session's worker is restarting, its routes answer a JSON 503 with `Retry-After`
(docs/architecture.md, Workers).

One router per resource, as in one process (`control/app.py`), and refusals raised and rendered by the
same handler (`control/errors.py`). The guard is the workers': the front checks a request's credentials
itself (`WorkerLink.guard`) only on what it answers without them, and the session a route names is
looked up as a dependency (`OwnerOf`: its worker, or the 404/410/503 it answers instead).
"""

from __future__ import annotations

import json
import logging
from typing import Annotated
from urllib.parse import unquote

from fastapi import APIRouter, Depends, FastAPI, Request
from starlette.responses import Response

from webarena_live.control.errors import ControlError, JsonResponse, install_error_handler
from webarena_live.control.streams import Streams
from webarena_live.evaluator import __version__
from webarena_live.fleet.front import events as front_events
from webarena_live.fleet.front import overview
from webarena_live.fleet.front.front import Front
from webarena_live.fleet.front.life import Owner, owner_of
from webarena_live.fleet.front.link import relayed, session_of, unavailable
from webarena_live.replicas.mutations import add_reads

logger = logging.getLogger("webarena_live.fleet")


async def _front(request: Request) -> Front:
    front: Front = request.app.state.front
    return front


FrontOf = Annotated[Front, Depends(_front)]
"""What every front route works on, as a FastAPI dependency (the app's `state.front`)."""


async def _owner(session: str, front: FrontOf) -> Owner:
    name = unquote(session)
    return Owner(name, owner_of(front, name))


OwnerOf = Annotated[Owner, Depends(_owner)]
"""The session the path names and its worker; raises what the route answers when it has none up."""


health = APIRouter(tags=["health"])
sessions = APIRouter(prefix="/sessions", tags=["sessions"])
agents = APIRouter(tags=["agents"])
events = APIRouter(prefix="/events", tags=["events"])
forwarded = APIRouter(tags=["forwarded"])
"""What the front does not answer itself: the worker of the session the path names, or any worker."""


@health.get("/health")
async def get_health(request: Request, front: FrontOf) -> Response:
    if not front.ready:  # not logged: this is what a launcher polls while the workers start
        return JsonResponse({"error": "starting", "detail": "the workers are starting"}, status_code=503)
    answer = await overview.health(front, request)
    answer["pool"] = add_reads(front.leases.pool.status(), *front.leases.reads.values())
    return JsonResponse(answer)


@sessions.get("")
async def get_sessions(request: Request, front: FrontOf) -> Response:
    return JsonResponse({"sessions": await overview.sessions(front, request)})


@sessions.post("")
async def post_sessions(request: Request, front: FrontOf) -> Response:
    return await front.life.start(request)


@sessions.post("/{session}/finish")
async def post_finish(owner: OwnerOf, request: Request, front: FrontOf) -> Response:
    return await front.life.finish(owner, request)


@sessions.post("/{session}/abandon")
async def post_abandon(owner: OwnerOf, request: Request, front: FrontOf) -> Response:
    return await front.life.abandon(owner, request)


@sessions.get("/{session}")
async def get_session(session: str, request: Request, front: FrontOf) -> Response:
    name, known = unquote(session), front.registry
    try:
        worker = owner_of(front, name)
    except ControlError:
        if name not in known.finished or name in known.starts:
            raise
        front.link.guard(request)  # the token holds here too
        return JsonResponse(known.finished[name])  # its worker is restarting or silent
    upstream = await front.link.send(worker, request, b"")
    content = await upstream.aread()
    await upstream.aclose()
    if upstream.status_code == 404 and name in front.registry.finished:  # its worker restarted since
        view = dict(front.registry.finished[name])
    elif upstream.status_code != 200:
        raise relayed(upstream, content)
    else:
        view = {**json.loads(content), "worker": worker.index, "node": worker.node}
    if front.registry.outputs is not None:
        if (carried := front.registry.carried_files(name)) is not None:
            view["outputs"] = carried
        elif view.get("outputs") and name not in front.registry.finished:
            view["outputs"] = front.registry.outputs.local(worker.index, view["outputs"])
    return JsonResponse(view)


@agents.get("/report")
async def get_report(request: Request, front: FrontOf, run: str | None = None) -> Response:
    workers = front.up_workers()
    if front.registry.report is None:  # the workers share the output directory: any of them answers
        if not workers:
            raise unavailable(front.workers[0])
        return await front.link.forward(workers[0], request)
    front.link.guard(request)
    return JsonResponse(await front.registry.report(run))


@events.get("")
async def get_events(request: Request, front: FrontOf) -> Response:
    return await front_events.merged_events(front, request)


@forwarded.api_route("/{path:path}", methods=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"])
async def any_route(path: str, request: Request, front: FrontOf) -> Response:
    name = session_of(request.url.path)
    if name is None:  # tasks, the dashboard, the OpenAPI document: the same on every worker
        workers = front.up_workers()
        if not workers:
            raise unavailable(front.workers[0])
        return await front.link.forward(workers[0], request)
    worker = owner_of(front, name)
    carried: dict[str, str] = {}
    if request.method == "POST" and path.endswith("/preview"):
        link = front.link
        carried = await front.leases.interference_header(link, link.up_workers(), name)
    return await front.link.forward(worker, request, headers=carried)


ROUTERS = (health, sessions, agents, events, forwarded)
"""In the order they match: the catch-all last."""


def create_front_app(front: Front) -> FastAPI:
    """The front's control API over `front`: its routers, the refusals' handler, and the streams its
    server closes when it stops."""
    app = FastAPI(title="webarena-live control API", version=__version__, openapi_url=None, docs_url=None,
                  redoc_url=None, default_response_class=JsonResponse, redirect_slashes=False)  # fmt: skip
    app.state.front = front
    app.state.streams = Streams()  # the control server closes the streams it knows of when it stops
    install_error_handler(app)
    for router in ROUTERS:
        app.include_router(router)
    return app
