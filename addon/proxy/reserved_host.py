"""The control app through the proxy: requests to `http://webarena-live.invalid/` are answered in place.

mitmproxy hosts the app (`mitmproxy.addons.asgiapp.serve`) on the flow, in
the proxy's loop; the caller's session, known from its proxy credentials, is
passed in a header the addon sets (and removes from what the client sent).
mitmproxy buffers the whole answer, so an event stream served this way is the
snapshot so far and ends (addon/control/streams.py).
"""

from __future__ import annotations

from urllib.parse import quote, unquote

from mitmproxy import http
from mitmproxy.addons import asgiapp
from mitmproxy.utils import human
from starlette.types import ASGIApp, Receive, Scope, Send

from webarena_live.addresses.headers import CALLER_HEADER, CLIENT_HEADER, FLEET_HEADER
from webarena_live.control.errors import error_response
from webarena_live.control.middleware import COMMON_HEADERS, MAX_CONTROL_BODY


async def serve_on_flow(app: ASGIApp, flow: http.HTTPFlow, *, caller: str | None) -> None:
    """Answer `flow` with `app`; `caller` is the session of the proxy credentials, if any."""
    request = flow.request
    request.headers.pop(CALLER_HEADER, None)  # only this addon names the caller
    if caller:
        request.headers[CALLER_HEADER] = quote(caller)
    raw_path, _, query = request.data.path.partition(b"?")

    async def as_sent(scope: Scope, receive: Receive, send: Send) -> None:
        # mitmproxy's scope quotes the path a second time and decodes the query; give the app the
        # request target as the client sent it, as uvicorn does on the control port.
        path = unquote(raw_path.decode("latin-1"))
        await app({**scope, "path": path, "raw_path": raw_path, "query_string": query}, receive, send)

    await asgiapp.serve(as_sent, flow)


def answer_too_large(flow: http.HTTPFlow) -> None:
    """The app's JSON 413, answered from the request's headers (its declared length is over the cap)."""
    detail = f"request body over {MAX_CONTROL_BODY} bytes"
    reply = error_response(413, "too_large", detail, method=flow.request.method, path=flow.request.path)
    headers = [*reply.raw_headers, (b"cache-control", b"no-store"), *COMMON_HEADERS]
    flow.response = http.Response.make(413, bytes(reply.body), headers)


def _declared_length(request: http.Request) -> int:
    """The request's Content-Length, 0 when absent or not a number."""
    value = request.headers.get("content-length", "")
    return int(value) if value.strip().isdigit() else 0


def _may_be_streamed(request: http.Request, stream_large_bodies: str | None) -> bool:
    """Whether mitmproxy may stream this request's body: over the limit, or of unknown length."""
    limit = human.parse_size(stream_large_bodies) if stream_large_bodies else None
    if limit is None:
        return False
    if "content-length" not in request.headers:
        return "chunked" in request.headers.get("transfer-encoding", "").lower()
    return _declared_length(request) > limit


def route_control(
    flow: http.HTTPFlow,
    caller: str | None,
    *,
    front: tuple[str, int] | None,
    server: tuple[str, int] | None,
    streaming: str | None,
    fleet_token: str | None = None,
) -> None:
    """Answer a control request in `request` (`serve_on_flow`), or send it on: to the front of a fleet
    (`front`, a worker's, with the fleet's token), or to the control port (`server`) when mitmproxy will
    stream its body (`streaming`: stream_large_bodies), which it cannot answer itself and would send
    upstream. The control port reads it under the same 10 MiB cap."""
    request = flow.request
    for ours in (CALLER_HEADER, CLIENT_HEADER, FLEET_HEADER):  # only this addon sets them
        request.headers.pop(ours, None)
    if front is not None:  # a worker: the front owns the control API
        if caller:
            request.headers[CALLER_HEADER] = quote(caller)
        # The front's door for its workers (on another machine: `serve --ray`) lets in the fleet's
        # token, and takes the agent's address from here (its session's address admits it).
        request.headers[CLIENT_HEADER] = flow.client_conn.peername[0] if flow.client_conn.peername else ""
        if fleet_token:
            request.headers[FLEET_HEADER] = fleet_token
        request.scheme, request.stream = "http", False
        request.host, request.port = front
        return
    if server is not None and _may_be_streamed(request, streaming):
        if caller:
            request.headers[CALLER_HEADER] = quote(caller)
        host, port = server
        request.scheme, request.port = "http", port
        request.host = "127.0.0.1" if host in ("", "0.0.0.0", "::") else host
        return
    request.stream = False
    if _declared_length(request) > MAX_CONTROL_BODY:
        answer_too_large(flow)  # before mitmproxy reads the body into memory
