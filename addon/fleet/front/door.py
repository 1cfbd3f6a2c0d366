"""The front's door for its Ray workers: the control API again, on this node's address, for the fleet only.

A worker passes the control requests agents send through its proxy (`webarena-live.invalid`) to the
front (`webarena_front`). With `--ray` that worker may be on another machine, which cannot reach a
control API on loopback, and opening the public control API beyond loopback would need the operator's
token. So the front opens a second listener on its Ray node's address, on a port of its own, that
lets in only requests carrying the fleet's token (`FLEET_HEADER`, set by the workers' addon; the
front makes the token and hands it to the workers with their start) and answers them with the same
app: the operator's own token, when there is one, is still checked as on the public port. The agent's
address comes from the worker (`CLIENT_HEADER`), so the session's address admits the agent, not the
worker's machine. See docs/architecture.md, Ray.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from fastapi import FastAPI

from webarena_live.addresses.headers import CLIENT_HEADER, FLEET_HEADER

_FLEET = FLEET_HEADER.lower().encode()
_CLIENT = CLIENT_HEADER.lower().encode()


class WorkersDoor:
    """An ASGI app: `app` for requests that carry the fleet's token, a JSON 403 for anything else."""

    def __init__(self, app: FastAPI, token: str) -> None:
        self.app, self.token = app, token
        self.state = app.state
        """The wrapped app's (the control server closes its event streams when it stops)."""
        self.refused = 0
        """Requests without the fleet's token answered 403 so far."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = [(name.lower(), value) for name, value in scope.get("headers", [])]
        given = next((value for name, value in headers if name == _FLEET), b"")
        if not secrets.compare_digest(given, self.token.encode()):  # constant time, as the control token
            self.refused += 1
            await _refuse(send)
            return
        client = next((value for name, value in headers if name == _CLIENT), b"").decode("latin-1")
        kept = [(name, value) for name, value in headers if name not in (_FLEET, _CLIENT)]
        scope = {**scope, "headers": kept}
        if client:  # the agent, as the worker saw it: what `POST /sessions` lets in at its address
            scope["client"] = (client, 0)
        await self.app(scope, receive, send)


async def _refuse(send: Any) -> None:
    body = json.dumps(
        {"error": "not_a_worker", "detail": "this port is for the fleet's workers only: use the control port"}
    ).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 403, "headers": headers})
    await send({"type": "http.response.body", "body": body})
